import { STEP_MS, UsageStep } from './usage-reader';

/**
 * Where each part of a usage query's time range is read from (docs/architecture.md "Usage from
 * rollups"). A point's bucket may be cut by the range ([from, to) need not be aligned to the step):
 * its figures are then those of the traces inside the range only, as the raw reader gives. So the
 * range is split into the largest aligned parts each rollup step can answer whole, coarse to fine:
 * whole buckets of the query's own step, then, at the edges, whole hours, whole minutes, and the
 * seconds left over read from decision_traces. Rows of a step are used only where they are complete
 * (`Coverage`): minutes within the minute horizon, hours and days within the rollups' retention.
 */
export type SegmentSource = UsageStep | 'raw';

export interface Segment {
  source: SegmentSource;
  /** Half-open [from, to), ms since the epoch. */
  from: number;
  to: number;
}

export interface Coverage {
  /** Minute rows hold every bucket starting at or after this (ms); null: none. */
  minuteFrom: number | null;
  /** Hour and day rows hold every bucket starting at or after this (ms); -Infinity: all. */
  rollupFrom: number;
}

/** The steps that can make up a point of each step, coarsest first. */
const FINER: Record<UsageStep, UsageStep[]> = { day: ['day', 'hour', 'minute'], hour: ['hour', 'minute'], minute: ['minute'] };

const floorTo = (ms: number, step: UsageStep) => Math.floor(ms / STEP_MS[step]) * STEP_MS[step];
const ceilTo = (ms: number, step: UsageStep) => Math.ceil(ms / STEP_MS[step]) * STEP_MS[step];

/**
 * [from, to) as consecutive segments, in time order, each read from one source; adjacent raw
 * segments merged. At most one segment has the query's own step (the range's whole buckets).
 */
export function segmentsOf(from: number, to: number, step: UsageStep, coverage: Coverage): Segment[] {
  const out: Segment[] = [];
  const push = (s: Segment) => {
    const last = out[out.length - 1];
    if (last && last.source === 'raw' && s.source === 'raw' && last.to === s.from) last.to = s.to;
    else out.push(s);
  };
  const split = (lo: number, hi: number, steps: readonly UsageStep[]): void => {
    if (lo >= hi) return;
    const [w, ...finer] = steps;
    if (w === undefined) return push({ source: 'raw', from: lo, to: hi });
    const start = w === 'minute' ? coverage.minuteFrom : coverage.rollupFrom;
    if (start === null) return split(lo, hi, finer);
    if (lo < start) {
      const mid = Math.min(hi, start);
      split(lo, mid, finer);
      return split(mid, hi, steps);
    }
    const a = ceilTo(lo, w);
    const b = floorTo(hi, w);
    if (a >= b) return split(lo, hi, finer);
    split(lo, a, finer);
    push({ source: w, from: a, to: b });
    split(b, hi, finer);
  };
  split(from, to, FINER[step]);
  return out;
}
