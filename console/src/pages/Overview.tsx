import { useMemo, useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { fmtInt, fmtMs, fmtPct, fmtUsd } from '../format';
import { useAsync } from '../hooks';
import type { UsagePage, UsagePoint } from '../types';
import { PALETTE, TimeChart, type ChartMarker, type ChartSeries } from '../ui/Chart';
import { ErrorBox, Loaded } from '../ui/states';
import { Table } from '../ui/Table';
import { Time } from '../ui/Time';
import { breakerMarkers, loadProviders, type ProvidersAnswer } from './Providers';

const STEP_MS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;
type Step = keyof typeof STEP_MS;

export const RANGES = [
  { id: '1h', label: 'Last hour', spanMs: 3_600_000, step: 'minute' },
  { id: '24h', label: 'Last 24 hours', spanMs: 86_400_000, step: 'hour' },
  { id: '7d', label: 'Last 7 days', spanMs: 7 * 86_400_000, step: 'hour' },
  { id: '30d', label: 'Last 30 days', spanMs: 30 * 86_400_000, step: 'day' },
] as const satisfies ReadonlyArray<{ id: string; label: string; spanMs: number; step: Step }>;

/** Every page of one usage query (docs/api.md "Admin API", usage), in time order. */
async function usage(query: Record<string, string>, signal: AbortSignal): Promise<UsagePoint[]> {
  const out: UsagePoint[] = [];
  let cursor: string | null = null;
  // 10,000 points at most per query (the API's own bound), 1,000 a page.
  for (let i = 0; i < 11; i++) {
    const page: UsagePage = await api<UsagePage>('GET', '/v1/admin/usage', { query: { ...query, limit: 1000, cursor }, signal });
    out.push(...page.data);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return out;
}

interface OverviewData {
  from: Date;
  to: Date;
  step: Step;
  totals: UsagePoint[];
  byModel: UsagePoint[];
  providers: ProvidersAnswer | ApiError;
}

/** Bucket starts (ms) from the bucket holding `from` up to `to`, as the API aligns them (UTC). */
function grid(from: Date, to: Date, step: Step): number[] {
  const ms = STEP_MS[step];
  const out: number[] = [];
  for (let t = Math.floor(from.getTime() / ms) * ms; t < to.getTime(); t += ms) out.push(t);
  return out;
}

/**
 * The organisation's traffic over a chosen range: totals, the series per bucket, each model's share
 * stacked, with fallbacks and circuit-breaker openings marked on the time axis. Every figure is the
 * API's (usage and providers); the page only sums buckets.
 */
export function Overview() {
  const [rangeId, setRangeId] = useState<(typeof RANGES)[number]['id']>('24h');
  const range = RANGES.find((r) => r.id === rangeId)!;
  const state = useAsync<OverviewData>(
    async (signal) => {
      const to = new Date();
      const from = new Date(to.getTime() - range.spanMs);
      const q = { from: from.toISOString(), to: to.toISOString(), step: range.step };
      const [totals, byModel, providers] = await Promise.all([
        usage(q, signal),
        usage({ ...q, group_by: 'model' }, signal),
        // The breaker markers are extra: their absence must not hide the traffic.
        loadProviders(signal, { from, to }).catch((e: unknown) => {
          if (e instanceof ApiError) return e;
          throw e;
        }),
      ]);
      return { from, to, step: range.step, totals, byModel, providers };
    },
    [rangeId],
  );
  return (
    <>
      <div class="section-head">
        <h1>Overview</h1>
        <label class="inline">
          Range
          <select value={rangeId} onChange={(e) => setRangeId((e.target as HTMLSelectElement).value as typeof rangeId)} data-testid="range">
            {RANGES.map((r) => (
              <option key={r.id} value={r.id}>
                {r.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <Loaded state={state} what="Loading usage">
        {(d) => <OverviewBody d={d} />}
      </Loaded>
    </>
  );
}

function OverviewBody({ d }: { d: OverviewData }) {
  const view = useMemo(() => {
    const times = grid(d.from, d.to, d.step);
    const index = new Map(times.map((t, i) => [t, i]));
    const at = (p: UsagePoint) => index.get(Date.parse(p.t));
    const zeros = () => times.map(() => 0);
    const nulls = () => times.map((): number | null => null);
    const requests = zeros();
    const errors = zeros();
    const cost = zeros();
    const p50 = nulls();
    const p99 = nulls();
    let fallbacks = 0;
    const markers: ChartMarker[] = [];
    const codes = new Map<string, number>();
    let weighted50 = 0;
    let weighted99 = 0;
    let weight = 0;
    for (const p of d.totals) {
      const i = at(p);
      if (i !== undefined) {
        requests[i] += p.requests;
        errors[i] += p.errors;
        cost[i] += p.cost_usd;
        p50[i] = p.latency_ms.p50;
        p99[i] = p.latency_ms.p99;
      }
      fallbacks += p.fallbacks;
      if (p.fallbacks > 0) markers.push({ t: Date.parse(p.t) / 1000, color: '#e6a700', label: `${p.fallbacks} fallback${p.fallbacks === 1 ? '' : 's'} in the bucket from ${new Date(p.t).toLocaleString()}`, dash: [4, 3] });
      for (const c of p.errors_by_code) codes.set(c.code, (codes.get(c.code) ?? 0) + c.count);
      // Percentiles come per bucket; the range's figure weighs each bucket by its successes (exact when one bucket holds the traffic).
      const ok = p.requests - p.errors;
      if (ok > 0 && p.latency_ms.p50 !== null && p.latency_ms.p99 !== null) {
        weighted50 += p.latency_ms.p50 * ok;
        weighted99 += p.latency_ms.p99 * ok;
        weight += ok;
      }
    }
    if (!(d.providers instanceof ApiError)) markers.push(...breakerMarkers(d.providers, d.from, d.to));
    const models = new Map<string, { requests: number; errors: number; cost: number; tokens: number; perBucket: number[] }>();
    for (const p of d.byModel) {
      const name = String(p.group?.model ?? '(none selected)');
      const m = models.get(name) ?? { requests: 0, errors: 0, cost: 0, tokens: 0, perBucket: zeros() };
      m.requests += p.requests;
      m.errors += p.errors;
      m.cost += p.cost_usd;
      m.tokens += p.tokens.prompt + p.tokens.completion;
      const i = at(p);
      if (i !== undefined) m.perBucket[i] += p.requests;
      models.set(name, m);
    }
    const totalRequests = requests.reduce((a, b) => a + b, 0);
    const share: ChartSeries[] = [...models.entries()]
      .sort((a, b) => b[1].requests - a[1].requests)
      .map(([name, m], k) => ({ label: name, color: PALETTE[k % PALETTE.length], values: m.perBucket.map((n, i) => (requests[i] > 0 ? (n / requests[i]) * 100 : null)) }));
    return {
      times: times.map((t) => t / 1000),
      requests,
      errors,
      cost,
      p50,
      p99,
      markers,
      fallbacks,
      totals: {
        requests: totalRequests,
        errors: errors.reduce((a, b) => a + b, 0),
        cost: cost.reduce((a, b) => a + b, 0),
        p50: weight ? weighted50 / weight : null,
        p99: weight ? weighted99 / weight : null,
      },
      models: [...models.entries()].map(([name, m]) => ({ name, ...m, share: totalRequests ? m.requests / totalRequests : 0 })),
      codes: [...codes.entries()].map(([code, count]) => ({ code, count })),
      share,
    };
  }, [d]);
  const t = view.totals;
  return (
    <>
      <p class="muted">
        From <Time iso={d.from.toISOString()} /> to <Time iso={d.to.toISOString()} />, in {d.step} buckets.
      </p>
      <ul class="tiles" data-testid="totals">
        <li data-figure="requests" data-value={t.requests}>
          <span class="tile-label">Requests</span>
          <span class="tile-value">{fmtInt(t.requests)}</span>
        </li>
        <li data-figure="errors" data-value={t.errors}>
          <span class="tile-label">Errors</span>
          <span class="tile-value">{fmtInt(t.errors)}</span>
          <span class="tile-note">{t.requests ? fmtPct(t.errors / t.requests) : ''}</span>
        </li>
        <li data-figure="cost" data-value={t.cost}>
          <span class="tile-label">Cost</span>
          <span class="tile-value">{fmtUsd(t.cost)}</span>
        </li>
        <li data-figure="p50" data-value={t.p50 ?? ''} title="Per bucket from the API; over several buckets, weighted by each bucket's successful requests">
          <span class="tile-label">Latency p50</span>
          <span class="tile-value">{fmtMs(t.p50)}</span>
        </li>
        <li data-figure="p99" data-value={t.p99 ?? ''} title="Per bucket from the API; over several buckets, weighted by each bucket's successful requests">
          <span class="tile-label">Latency p99</span>
          <span class="tile-value">{fmtMs(t.p99)}</span>
        </li>
        <li data-figure="fallbacks" data-value={view.fallbacks}>
          <span class="tile-label">Fallbacks</span>
          <span class="tile-value">{fmtInt(view.fallbacks)}</span>
        </li>
      </ul>
      {d.providers instanceof ApiError ? (
        <div class="note">
          Circuit-breaker openings cannot be marked: <ErrorBox error={d.providers} testId="providers-error" />
        </div>
      ) : null}
      <div class="charts">
        <TimeChart
          label="Traffic share per model (%)"
          testId="chart-share"
          times={view.times}
          series={view.share}
          stacked
          bars
          yMax={100}
          markers={view.markers}
          format={(v) => `${Math.round(v)}%`}
        />
        <TimeChart
          label="Requests and errors"
          testId="chart-requests"
          times={view.times}
          series={[
            { label: 'requests', color: PALETTE[0], values: view.requests },
            { label: 'errors', color: PALETTE[3], values: view.errors },
          ]}
          markers={view.markers}
          format={(v) => fmtInt(v)}
        />
        <TimeChart
          label="Latency p50 and p99 (successful requests)"
          testId="chart-latency"
          times={view.times}
          series={[
            { label: 'p50', color: PALETTE[2], values: view.p50 },
            { label: 'p99', color: PALETTE[4], values: view.p99 },
          ]}
          format={(v) => fmtMs(v)}
        />
        <TimeChart label="Cost (USD)" testId="chart-cost" times={view.times} series={[{ label: 'cost', color: PALETTE[1], values: view.cost }]} format={(v) => fmtUsd(v)} />
      </div>
      <section aria-labelledby="by-model">
        <h2 id="by-model">By model</h2>
        <Table
          rows={view.models}
          rowKey={(m) => m.name}
          label="Traffic by model"
          testId="by-model"
          initialSort={{ id: 'requests', dir: 'desc' }}
          empty="No traffic in this range."
          columns={[
            { id: 'model', label: 'Model', sort: (m) => m.name, render: (m) => m.name },
            { id: 'requests', label: 'Requests', numeric: true, sort: (m) => m.requests, render: (m) => fmtInt(m.requests) },
            { id: 'share', label: 'Share', numeric: true, sort: (m) => m.share, render: (m) => fmtPct(m.share) },
            { id: 'errors', label: 'Errors', numeric: true, sort: (m) => m.errors, render: (m) => fmtInt(m.errors) },
            { id: 'tokens', label: 'Tokens', numeric: true, sort: (m) => m.tokens, render: (m) => fmtInt(m.tokens) },
            { id: 'cost', label: 'Cost', numeric: true, sort: (m) => m.cost, render: (m) => fmtUsd(m.cost) },
          ]}
        />
      </section>
      <section aria-labelledby="by-code">
        <h2 id="by-code">Errors by code</h2>
        <Table
          rows={view.codes}
          rowKey={(c) => c.code}
          label="Errors by code"
          testId="by-code"
          initialSort={{ id: 'count', dir: 'desc' }}
          empty="No errors in this range."
          columns={[
            { id: 'code', label: 'Code', sort: (c) => c.code, render: (c) => <code>{c.code}</code> },
            { id: 'count', label: 'Errors', numeric: true, sort: (c) => c.count, render: (c) => fmtInt(c.count) },
          ]}
        />
      </section>
    </>
  );
}
