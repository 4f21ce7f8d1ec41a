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
 * Port of the cache store (DESIGN §2): Redis via `ioredis` (Lua for atomic steps), or in-process
 * memory with the same semantics. Every call either answers within the adapter's timeout or
 * rejects; callers decide how to degrade (DESIGN §10).
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
  abstract ping(timeoutMs: number): Promise<void>;
  abstract close(): Promise<void>;
}
