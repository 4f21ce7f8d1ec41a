import type { BreakerOp, BreakerParams, SettleCounter, SettleWindow, SpendCounter, SpendWindow, WindowCheck } from './cache-store';

/*
 * Argument rules shared by both adapters, so a caller's mistake fails the same way on memory as on
 * Redis, and a key layout that would break on Redis Cluster shows up in tests without one.
 */

export function checkTtl(ttlMs: number): number {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`ttlMs must be a positive number, got ${ttlMs}`);
  return Math.ceil(ttlMs);
}

export function checkLimit(n: number, name = 'limit'): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be an integer >= 0, got ${n}`);
}

/** Redis Cluster hashes only the part of a key between the first `{` and the next `}`, when not empty. */
export function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * Windows must be distinct keys (one log per window) and, when there are several, share one hash
 * tag such as `{org:acme}`: Redis Cluster runs a script on one slot (docs/architecture.md "Stateless replicas").
 */
export function checkWindows(checks: readonly WindowCheck[]): void {
  if (checks.length === 0) throw new RangeError('hitWindows needs at least one window');
  const keys = new Set<string>();
  for (const c of checks) {
    checkLimit(c.limit, `limit of ${c.key}`);
    if (!Number.isSafeInteger(c.windowMs) || c.windowMs < 1) throw new RangeError(`windowMs of ${c.key} must be an integer >= 1, got ${c.windowMs}`);
    if (keys.has(c.key)) throw new RangeError(`hitWindows keys must be distinct: ${c.key} appears twice`);
    keys.add(c.key);
  }
  if (checks.length > 1) {
    const tag = hashTag(checks[0].key);
    if (tag === undefined || checks.some((c) => hashTag(c.key) !== tag)) {
      throw new RangeError('hitWindows keys must share one hash tag such as {org:acme}: Redis Cluster runs a script on one slot');
    }
  }
}

/** The second key of a spend window: the sum of its hits' costs (same hash tag as the window). */
export const sumKeyOf = (windowKey: string): string => `${windowKey}:sum`;

/** Keys of one spend or settle call: distinct (a window's sum key included) and all under one hash tag. */
function checkSpendKeys(what: string, keys: readonly string[]): void {
  if (keys.length === 0) throw new RangeError(`${what} needs at least one window or counter`);
  const tag = hashTag(keys[0]);
  const seen = new Set<string>();
  for (const k of keys) {
    if (seen.has(k)) throw new RangeError(`${what} keys must be distinct: ${k} appears twice`);
    seen.add(k);
    // A window is two keys, so even a single one needs a tag to stay on one slot of Redis Cluster.
    if (tag === undefined || hashTag(k) !== tag) throw new RangeError(`${what} keys must share one hash tag such as {org:acme}: Redis Cluster runs a script on one slot`);
  }
}

const isCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

/** Spend arguments, checked alike on both adapters (the Lua script trusts them). */
export function checkSpend(windows: readonly SpendWindow[], counters: readonly SpendCounter[]): void {
  for (const w of windows) {
    checkLimit(w.limit, `limit of ${w.key}`);
    if (!Number.isSafeInteger(w.windowMs) || w.windowMs < 1) throw new RangeError(`windowMs of ${w.key} must be an integer >= 1, got ${w.windowMs}`);
    if (!isCount(w.cost)) throw new RangeError(`cost of ${w.key} must be an integer >= 0, got ${w.cost}`);
  }
  for (const c of counters) {
    checkLimit(c.limit, `limit of ${c.key}`);
    if (!isCount(c.amount)) throw new RangeError(`amount of ${c.key} must be an integer >= 0, got ${c.amount}`);
    checkTtl(c.ttlMs);
    if (c.seed !== undefined && !isCount(c.seed)) throw new RangeError(`seed of ${c.key} must be an integer >= 0, got ${c.seed}`);
    if (c.reseed && c.seed === undefined) throw new RangeError(`reseed of ${c.key} needs a seed`);
  }
  checkSpendKeys('spend', [...windows.flatMap((w) => [w.key, sumKeyOf(w.key)]), ...counters.map((c) => c.key)]);
}

export function checkSettle(windows: readonly SettleWindow[], counters: readonly SettleCounter[]): void {
  for (const w of windows) {
    if (typeof w.hit !== 'string' || w.hit.length === 0 || w.hit.includes('|')) throw new RangeError(`hit of ${w.key} must be a spend's hit id`);
    if (!isCount(w.from) || !isCount(w.to)) throw new RangeError(`costs of ${w.key} must be integers >= 0`);
  }
  for (const c of counters) {
    if (!Number.isSafeInteger(c.delta)) throw new RangeError(`delta of ${c.key} must be an integer, got ${c.delta}`);
  }
  checkSpendKeys('settle', [...windows.flatMap((w) => [w.key, sumKeyOf(w.key)]), ...counters.map((c) => c.key)]);
}

/** Most successes one breaker step takes in a row (the script loops over them). */
const MAX_BREAKER_REPEAT = 100_000;

const BREAKER_OPS: readonly BreakerOp[] = ['acquire', 'success', 'failure', 'probe_success', 'probe_failure', 'probe_release', 'state'];

/** Breaker arguments, checked alike on both adapters (the Lua script trusts them). */
export function checkBreaker(op: BreakerOp, p: BreakerParams, nowMs: number | undefined, repeat = 1): void {
  if (!BREAKER_OPS.includes(op)) throw new RangeError(`unknown breaker op ${String(op)}`);
  if (!Number.isSafeInteger(repeat) || repeat < 1 || repeat > MAX_BREAKER_REPEAT) throw new RangeError(`breaker repeat must be an integer in [1, ${MAX_BREAKER_REPEAT}], got ${repeat}`);
  if (repeat > 1 && op !== 'success') throw new RangeError(`breaker repeat is for success only, got ${op}`);
  for (const name of ['failureThreshold', 'windowMs', 'buckets', 'minRequests', 'baseOpenMs', 'maxOpenMs', 'probeLeaseMs', 'ttlMs'] as const) {
    if (!Number.isSafeInteger(p[name]) || p[name] < 1) throw new RangeError(`breaker ${name} must be an integer >= 1, got ${p[name]}`);
  }
  if (p.maxOpenMs < p.baseOpenMs) throw new RangeError('breaker maxOpenMs must be >= baseOpenMs');
  if (!(p.failureRatio > 0 && p.failureRatio <= 1)) throw new RangeError(`breaker failureRatio must be in (0, 1], got ${p.failureRatio}`);
  if (!(p.jitter >= 0 && p.jitter < 1)) throw new RangeError(`breaker jitter must be in [0, 1), got ${p.jitter}`);
  if (!(p.random >= 0 && p.random < 1)) throw new RangeError(`breaker random must be in [0, 1), got ${p.random}`);
  if (nowMs !== undefined && (!Number.isSafeInteger(nowMs) || nowMs < 0)) throw new RangeError(`nowMs must be an integer >= 0, got ${nowMs}`);
}
