/** One window of a sliding-window limit: at most `limit` hits in the last `windowMs`. */
export interface WindowCheck {
  key: string;
  limit: number;
  windowMs: number;
}

export interface WindowDecision {
  allowed: boolean;
  /** When denied: milliseconds until the first denying window frees a slot (≥ 1). 0 when allowed. */
  retryAfterMs: number;
  /** Index into the checks of the first window that denied, or -1. */
  deniedIndex: number;
  /** Hits in each window after this call (spent ones included when allowed). */
  counts: number[];
}

export interface CounterDecision {
  allowed: boolean;
  /** The counter's value after this call (not incremented when denied). */
  value: number;
}

/**
 * One window of a weighted sliding-window limit (tokens or requests per minute): the costs of the
 * hits younger than `windowMs` sum to at most `limit`. A requests window spends cost 1 per call.
 */
export interface SpendWindow {
  key: string;
  limit: number;
  windowMs: number;
  /** What this call spends in the window (integer >= 0). */
  cost: number;
}

/** A counter of the month (requests, spend in micro-USD) that a spend never takes past `limit`. */
export interface SpendCounter {
  key: string;
  limit: number;
  /** What this call adds (integer >= 0). */
  amount: number;
  /** Expiry set when the counter is created (never extended: a month ends on time). */
  ttlMs: number;
  /**
   * The value to create the counter at when it does not exist (its durable count); absent = a
   * missing counter is reported (`missing`) so the caller can read that count and come back.
   */
  seed?: number;
  /** Sets the counter to `seed` even when it exists: it is rebuilt from the durable count. */
  reseed?: boolean;
}

export interface SpendDecision {
  /**
   * `allowed`: every window and counter had room and each was spent. `denied`: one had none, and
   * nothing was spent (a counter given a seed is created at it all the same). `missing`: no window or existing counter denied, but a counter without a
   * seed does not exist; nothing was spent.
   */
  outcome: 'allowed' | 'denied' | 'missing';
  /** The first denying entry, windows first then counters (index into windows ++ counters); -1 when none denied. */
  deniedIndex: number;
  /** When a window denied: ms until enough of it has left the window for this cost (>= 1). 0 otherwise. */
  retryAfterMs: number;
  /** Each window's sum after this call. */
  windows: number[];
  /** Each counter's value after this call; null for a missing one. */
  counters: (number | null)[];
  /** Names this call's hit in every window, for `settle`; null when nothing was spent. */
  hit: string | null;
}

/** Replaces the cost of a hit a `spend` made (`from`, as spent) by what it really cost (`to`). */
export interface SettleWindow {
  key: string;
  hit: string;
  from: number;
  to: number;
}

/** Adds `delta` (which may be negative) to an existing counter, never below 0. */
export interface SettleCounter {
  key: string;
  delta: number;
}

/** Steps of the shared circuit breaker (docs/architecture.md "Circuit breakers"; lua/breaker.lua documents each). */
export type BreakerOp = 'acquire' | 'success' | 'failure' | 'probe_success' | 'probe_failure' | 'probe_release' | 'state';

/** Tuning of the circuit breaker, passed on every call so both adapters hold no configuration. */
export interface BreakerParams {
  /** Consecutive failures that open a closed breaker (integer >= 1). */
  failureThreshold: number;
  /** Length of the failure-rate window in ms, kept as `buckets` equal buckets (integers >= 1). */
  windowMs: number;
  buckets: number;
  /** Fewest requests in the window before the failure-rate rule applies (integer >= 1). */
  minRequests: number;
  /** Share of failures in the window, in (0, 1], that opens the breaker. */
  failureRatio: number;
  /** Open time of the n-th consecutive opening: min(maxOpenMs, baseOpenMs·2^(n−1)), then jittered. */
  baseOpenMs: number;
  maxOpenMs: number;
  /** Relative jitter in [0, 1): the open time is scaled by 1 + jitter·(2·random − 1). */
  jitter: number;
  /** A uniform draw in [0, 1), drawn by the caller so both adapters agree and tests can fix it. */
  random: number;
  /** How long a half-open probe lease holds before another caller may probe (a crashed probe). */
  probeLeaseMs: number;
  /** The state is forgotten after this long without a write (on top of any remaining open time). */
  ttlMs: number;
}

/** A circuit breaker's state (docs/architecture.md "Circuit breakers"); the one definition, the breaker service re-exports it. */
export type BreakerState = 'closed' | 'open' | 'half_open';
/** What `acquire` grants: go ahead (closed), the half-open probe lease, or no. */
export type BreakerPermit = 'allow' | 'probe' | 'reject';

export interface BreakerDecision {
  /** State after the call; `half_open` = open time over (whether or not a probe is out). */
  state: BreakerState;
  /** For `acquire`: the permit granted; null for every other step. */
  permit: BreakerPermit | null;
  /** Milliseconds since the epoch when the open time ends(ed); null while closed. */
  openUntil: number | null;
  consecutiveFailures: number;
  /** Consecutive openings without a successful probe in between. */
  openings: number;
  /** True for the one call that opened (or re-opened) the breaker, so replicas count each opening once. */
  opened: boolean;
}

/**
 * Port of the cache store (docs/architecture.md "Three stores behind ports"): Redis via `ioredis` (Lua for atomic steps), or in-process
 * memory with the same semantics. Every call either answers within the adapter's timeout or
 * rejects; callers decide how to degrade (docs/architecture.md "Degrade, never hang").
 */
export abstract class CacheStore {
  abstract readonly kind: 'redis' | 'memory';
  abstract get(key: string): Promise<string | null>;
  abstract set(key: string, value: string, ttlMs: number): Promise<void>;
  abstract del(...keys: string[]): Promise<void>;
  /**
   * Sliding windows checked and spent in one atomic step: when every window has room, one hit is
   * recorded in each; when any is full, none is spent.
   */
  abstract hitWindows(checks: readonly WindowCheck[]): Promise<WindowDecision>;
  /**
   * Atomic check-and-count: increments `key` by one unless that would exceed `limit`; sets the
   * key's expiry to `ttlMs` when it is created.
   */
  abstract incrementBelow(key: string, limit: number, ttlMs: number): Promise<CounterDecision>;
  /**
   * Weighted sliding windows and counters of the month checked and spent in one atomic step (the
   * per-key and per-organisation controls: docs/architecture.md "One limiter for every limit").
   * Every key must carry the same hash tag. A window keeps a second key, `<key>:sum`.
   */
  abstract spend(windows: readonly SpendWindow[], counters: readonly SpendCounter[]): Promise<SpendDecision>;
  /**
   * After the answer: each hit's cost replaced by the real one (a hit that already left its window
   * is left alone) and each existing counter moved by its delta, in one atomic step.
   */
  abstract settle(windows: readonly SettleWindow[], counters: readonly SettleCounter[]): Promise<void>;
  /**
   * One atomic step of the circuit breaker whose state lives at `key` (a per-provider key such as
   * `cb:{provider:openai}`), so every replica sees one breaker. `nowMs` overrides the store's clock
   * (the Redis server's TIME, or the memory store's injected clock); callers normally omit it.
   * `repeat` (success only, default 1): that many successes in a row in one step, each counted and
   * checked as if it came alone, so reports gathered over a moment cost one call.
   */
  abstract breaker(key: string, op: BreakerOp, params: BreakerParams, nowMs?: number, repeat?: number): Promise<BreakerDecision>;
  abstract ping(timeoutMs: number): Promise<void>;
  abstract close(): Promise<void>;
}
