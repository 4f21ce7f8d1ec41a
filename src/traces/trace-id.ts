import { randomInt } from 'node:crypto';

/**
 * Decision-trace ids (docs/architecture.md "Retention"): made by the replica that builds the trace,
 * with no coordination between replicas, so a batch written twice (an INSERT whose answer was lost,
 * a replayed journal) is stored once: `decision_traces` is keyed by (created_at, id) and written with
 * ON CONFLICT DO NOTHING.
 *
 * An id is a positive integer below 2^53: (UTC day since 2025-01-01) · 2^37 + a 37-bit part. Below
 * 2^53 because rows reach JavaScript as numbers (the `pg` adapter turns a larger int8 into a BigInt,
 * which JSON cannot write), and a bigint costs 8 bytes where a uuid costs 16 in the row and again in
 * the primary key. The day comes first so ids sort by day (the partition a trace lives in) and a
 * newer id is never smaller than an older one of the same process. The 37-bit part starts at a random
 * point below 2^36 for each day of each process and counts up by one per trace, so a process's ids
 * are unique and increasing.
 *
 * Collisions: two traces clash only when they carry the same id and the same created_at
 * millisecond. Of two processes writing n traces a day each, about n²/2^36 pairs of traces share an
 * id value, and such a pair also shares a millisecond with odds of 1 in 86,400,000: at 10 replicas ×
 * 100 traces/s, one lost trace in about five years. An id spending 32 bits on seconds (21 left to
 * chance) would lose about 20 a day at that rate: the millisecond is already in the key, so the id
 * spends its bits on uniqueness.
 */
const DAY_MS = 86_400_000;
/** 2025-01-01 as a day number since 1970-01-01. */
const EPOCH_DAY = Date.UTC(2025, 0, 1) / DAY_MS;
const LOW_SPAN = 2 ** 37;
const START_SPAN = 2 ** 36;
/** Ids of 16-bit days stay below 2^53 (until 2204). */
const MAX_DAY = 2 ** 16 - 1;

export class TraceIdGenerator {
  private day = -1;
  private next = 0;

  /** `random` gives the counter's start for a new day: an integer in [0, 2^36). */
  constructor(private readonly random: () => number = () => randomInt(START_SPAN)) {}

  /** The next id of this process for a trace created at `atMs` (ms since epoch). */
  nextId(atMs: number): number {
    const at = Number.isFinite(atMs) ? Math.floor(atMs / DAY_MS) - EPOCH_DAY : this.day;
    // A clock stepped back keeps the later day: ids of one process only ever increase.
    let day = Math.min(MAX_DAY, Math.max(0, this.day, at));
    // 2^36 ids in one day cannot happen; if it did, the next day's ids keep them increasing.
    if (day === this.day && this.next >= LOW_SPAN) day = Math.min(MAX_DAY, day + 1);
    if (day !== this.day) {
      this.day = day;
      // + 1: no id is 0.
      this.next = this.random() + 1;
    }
    return this.day * LOW_SPAN + this.next++;
  }
}

const processIds = new TraceIdGenerator();

/** A new id for a trace created at `atMs` (default now), from this process's generator. */
export function newTraceId(atMs: number = Date.now()): number {
  return processIds.nextId(atMs);
}

/** Whether `v` can be a stored trace id (a safe positive integer). */
export function isTraceId(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
}
