import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { useEffect, useRef } from 'preact/hooks';
import { fmtLocal } from '../format';

export interface ChartSeries {
  label: string;
  color: string;
  values: ReadonlyArray<number | null>;
}

/** A vertical line on the time axis (a fallback, a breaker opening): its time in seconds. */
export interface ChartMarker {
  t: number;
  color: string;
  label: string;
  dash?: number[];
}

export interface TimeChartProps {
  /** Bucket starts, in seconds since the epoch (uPlot's unit). */
  times: readonly number[];
  series: readonly ChartSeries[];
  markers?: readonly ChartMarker[];
  /** Draw the series stacked (each on top of the ones before it), e.g. traffic share per model. */
  stacked?: boolean;
  height?: number;
  label: string;
  testId?: string;
  format?: (v: number) => string;
  /** Bars per bucket (sparse bucketed data) instead of lines. */
  bars?: boolean;
  /** A fixed top of the y axis (100 for shares in %). */
  yMax?: number;
}

export const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

/** Each bucket drawn as a bar starting at its own time. */
const barPaths = uPlot.paths.bars!({ size: [0.9, 48], align: 1 });

function markersPlugin(markers: readonly ChartMarker[]): uPlot.Plugin {
  return {
    hooks: {
      draw: (u) => {
        const { ctx } = u;
        const { top, height, left, width } = u.bbox;
        ctx.save();
        for (const m of markers) {
          const x = Math.round(u.valToPos(m.t, 'x', true));
          if (x < left || x > left + width) continue;
          ctx.strokeStyle = m.color;
          ctx.lineWidth = 2 * uPlot.pxRatio;
          ctx.setLineDash((m.dash ?? []).map((d) => d * uPlot.pxRatio));
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, top + height);
          ctx.stroke();
        }
        ctx.restore();
      },
    },
  };
}

/**
 * A uPlot time-series chart in the browser's time zone, sized to its container (and re-sized with
 * it). Stacked series are drawn as running sums, top one first, each filled down to zero, while the
 * legend shows each series' own value.
 */
export function TimeChart({ times, series, markers = [], stacked, height = 220, label, testId, format = (v) => String(v), bars, yMax }: TimeChartProps) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const own = series.map((s) => s.values);
    let drawn: ChartSeries[] = [...series];
    let values: Array<ReadonlyArray<number | null>> = own;
    let order = series.map((_, i) => i);
    if (stacked) {
      const sums: Array<Array<number | null>> = [];
      // A bucket where every series is null (no traffic) stays a gap rather than a zero.
      const empty = times.map((_, j) => series.every((s) => s.values[j] === null || s.values[j] === undefined));
      series.forEach((s, i) => sums.push(s.values.map((v, j) => (empty[j] ? null : (v ?? 0) + (i > 0 ? (sums[i - 1][j] ?? 0) : 0))) as number[]));
      order = series.map((_, i) => series.length - 1 - i);
      drawn = order.map((i) => series[i]);
      values = order.map((i) => sums[i]);
    }
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      // Bars start at their bucket's time: the axis runs one bucket past the last, so the last bar shows whole.
      scales: { x: { time: true, range: (_u, min, max) => [min, bars && times.length > 1 ? max + (times[1] - times[0]) : max] }, y: { range: (_u, min, max) => [Math.min(0, min), yMax ?? (max > 0 ? max * 1.05 : 1)] } },
      series: [
        { value: (_u, v) => (v === null ? '—' : fmtLocal(new Date(v * 1000))) },
        ...drawn.map((s, k) => ({
          label: s.label,
          stroke: s.color,
          width: 1.5,
          fill: stacked || bars ? s.color + 'cc' : undefined,
          ...(bars ? { paths: barPaths, points: { show: false } } : {}),
          value: (_u: uPlot, _v: number | null, _si: number, idx: number | null) => {
            const raw = idx === null ? null : own[order[k]][idx];
            return raw === null || raw === undefined ? '—' : format(raw);
          },
        })),
      ],
      axes: [
        {},
        {
          values: (_u, ticks) => ticks.map((t) => format(t)),
          // Wide enough for the longest label ($0.000600, 1,200 ms).
          size: (_u, values) => (values?.length ? Math.max(...values.map((v) => String(v).length)) * 8 + 22 : 40),
        },
      ],
      plugins: [markersPlugin(markers)],
      cursor: { drag: { x: false, y: false } },
    };
    const data = [Array.from(times), ...values.map((v) => Array.from(v))] as uPlot.AlignedData;
    const plot = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (w !== plot.width) plot.setSize({ width: w, height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [times, series, markers, stacked, height, format, bars, yMax]);
  return (
    <figure class="chart" data-testid={testId} data-points={times.length} data-series={series.map((s) => s.label).join(',')} data-markers={markers.length}>
      <figcaption>{label}</figcaption>
      <div ref={box} class="chart-canvas" role="img" aria-label={label} />
      {markers.length ? (
        <ul class="markers" aria-label="Marked times">
          {markers.map((m, i) => (
            <li key={i}>
              <span class="swatch" style={{ background: m.color }} aria-hidden="true" /> {m.label}
            </li>
          ))}
        </ul>
      ) : null}
    </figure>
  );
}
