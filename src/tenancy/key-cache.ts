import type { Caller } from '../common/http/request-context';
import { setBounded } from '../common/bounded-map';

interface Entry {
  caller: Caller | null;
  expiresAt: number;
}

/**
 * In-process cache of key-hash → caller, positive and negative, with short TTLs so a revocation or
 * a config change reaches every replica within seconds. Bounded: the oldest entries go first.
 */
export class KeyCache {
  private readonly entries = new Map<string, Entry>();
  constructor(
    private readonly positiveTtlMs = 10_000,
    private readonly negativeTtlMs = 5_000,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** `undefined` = not cached; `null` = cached as unknown. */
  get(hash: string): Caller | null | undefined {
    const e = this.entries.get(hash);
    if (!e) return undefined;
    if (e.expiresAt <= this.now()) {
      this.entries.delete(hash);
      return undefined;
    }
    return e.caller;
  }

  set(hash: string, caller: Caller | null): void {
    setBounded(this.entries, hash, { caller, expiresAt: this.now() + (caller ? this.positiveTtlMs : this.negativeTtlMs) }, this.maxEntries);
  }

  delete(hash: string): void {
    this.entries.delete(hash);
  }
}
