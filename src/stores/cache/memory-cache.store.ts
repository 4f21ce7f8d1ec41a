import { assertUnreachable } from '../../common/errors/error-catalogue';
import { checkBreaker, checkLimit, checkSettle, checkSpend, checkTtl, checkWindows } from './cache-input';
import {
  BreakerDecision, BreakerOp, BreakerParams, CacheStore, CounterDecision, SettleCounter, SettleWindow, SpendCounter, SpendDecision, SpendWindow, WindowCheck,
  WindowDecision,
} from './cache-store';
import { setBounded } from '../../common/bounded-map';
import { HitLog } from './hit-log';

export interface MemoryCacheStoreOptions {
  /** Milliseconds since the epoch; injectable so tests move time instead of sleeping. */
  now?: () => number;
  /** Beyond this many keys the least recently written ones are evicted, so memory stays bounded. */
  maxEntries?: number;
  /** How often expired entries are swept (reads also drop them as they meet them). */
  sweepIntervalMs?: number;
}

type Entry =
  | { type: 'string'; value: string; expiresAt: number }
  /** A sliding log: hit times, oldest first (lua/hit-windows.lua keeps a sorted set). */
  | { type: 'log'; hits: HitLog; expiresAt: number }
  /** A weighted sliding log: hits oldest first and the sum of their costs (lua/spend.lua keeps a sorted set and a sum key). */
  | { type: 'spend-log'; hits: HitLog; sum: number; expiresAt: number }
  /** A circuit breaker: the fields of the hash lua/breaker.lua keeps. */
  | { type: 'breaker'; st: 0 | 1; cf: number; op: number; ou: number; pu: number; window: Map<number, { n: number; f: number }>; expiresAt: number };

const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

/**
 * The embedded cache store: the semantics of the Redis adapter and its Lua scripts,
 * in one process. Every operation runs synchronously inside one call, which is what makes
 * hitWindows and incrementBelow atomic here. Not shared between replicas: the embedded default is
 * for a single process.
 */
export class MemoryCacheStore extends CacheStore {
  readonly kind = 'memory' as const;
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly maxEntries: number;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  private lastSweepAt = -Infinity;
  private sequence = 0;

  constructor(options: MemoryCacheStoreOptions = {}) {
    super();
    this.now = options.now ?? Date.now;
    this.maxEntries = options.maxEntries ?? 100_000;
    this.sweeper = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 30_000);
    // The sweeper must not keep a finished process (or a test run) alive.
    this.sweeper.unref();
  }

  /** Number of keys held, expired ones not yet swept included. */
  get size(): number {
    return this.entries.size;
  }

  async get(key: string): Promise<string | null> {
    this.open();
    const entry = this.live(key);
    if (entry === undefined) return null;
    if (entry.type !== 'string') throw new Error(WRONGTYPE);
    return entry.value;
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    this.open();
    const ttl = checkTtl(ttlMs);
    this.write(key, { type: 'string', value, expiresAt: this.now() + ttl });
  }

  async del(...keys: string[]): Promise<void> {
    this.open();
    for (const key of keys) this.entries.delete(key);
  }

  async hitWindows(checks: readonly WindowCheck[]): Promise<WindowDecision> {
    this.open();
    checkWindows(checks);
    const now = this.now();
    const logs: HitLog[] = [];
    const counts: number[] = [];
    let deniedIndex = -1;
    let retryAfterMs = 0;
    for (const [i, check] of checks.entries()) {
      const entry = this.live(check.key);
      if (entry !== undefined && entry.type !== 'log') throw new Error(WRONGTYPE);
      const hits = entry?.hits ?? new HitLog();
      // A hit counts while it is younger than the window, as in the Lua script.
      hits.dropUntil(now - check.windowMs);
      logs.push(hits);
      counts.push(hits.length);
      if (deniedIndex === -1 && hits.length >= check.limit) {
        deniedIndex = i;
        retryAfterMs = hits.length > 0 ? Math.max(1, Math.ceil(hits.timeAt(0) + check.windowMs - now)) : check.windowMs;
      }
    }
    if (deniedIndex === -1) {
      for (const [i, check] of checks.entries()) {
        const hits = logs[i];
        hits.add(now, 1);
        // The log goes when its newest hit leaves the window, as PEXPIREAT does in the script.
        this.write(check.key, { type: 'log', hits, expiresAt: hits.newest() + check.windowMs });
        counts[i] = hits.length;
      }
    } else {
      for (const [i, check] of checks.entries()) {
        if (logs[i].length === 0) this.entries.delete(check.key);
      }
    }
    return { allowed: deniedIndex === -1, retryAfterMs, deniedIndex, counts };
  }

  async incrementBelow(key: string, limit: number, ttlMs: number): Promise<CounterDecision> {
    this.open();
    checkLimit(limit);
    const ttl = checkTtl(ttlMs);
    const entry = this.live(key);
    if (entry !== undefined && entry.type !== 'string') throw new Error(WRONGTYPE);
    if (entry !== undefined && !/^-?\d+$/.test(entry.value)) throw new Error('ERR value is not an integer or out of range');
    const value = entry === undefined ? 0 : Number(entry.value);
    if (value >= limit) return { allowed: false, value };
    // The expiry is set when the counter is created, never extended: a monthly window ends on time.
    this.write(key, { type: 'string', value: String(value + 1), expiresAt: entry?.expiresAt ?? this.now() + ttl });
    return { allowed: true, value: value + 1 };
  }

  /** lua/spend.lua (its header documents it), in one synchronous run. */
  async spend(windows: readonly SpendWindow[], counters: readonly SpendCounter[]): Promise<SpendDecision> {
    this.open();
    checkSpend(windows, counters);
    const now = this.now();
    const logs: HitLog[] = [];
    const sums: number[] = [];
    let deniedIndex = -1;
    let retryAfterMs = 0;
    for (const [i, w] of windows.entries()) {
      const entry = this.live(w.key);
      if (entry !== undefined && entry.type !== 'spend-log') throw new Error(WRONGTYPE);
      const hits = entry?.hits ?? new HitLog();
      // A hit counts while it is younger than the window, as in the Lua script.
      const freed = hits.dropUntil(now - w.windowMs);
      const sum = hits.length === 0 ? 0 : (entry?.sum ?? 0) - freed;
      if (entry) {
        entry.sum = sum;
        if (hits.length === 0) this.entries.delete(w.key);
      }
      logs.push(hits);
      sums.push(sum);
      if (deniedIndex === -1 && sum + w.cost > w.limit) {
        deniedIndex = i;
        if (w.cost <= w.limit) {
          let left = 0;
          for (let k = 0; k < hits.length; k++) {
            left += hits.costAt(k);
            if (sum - left + w.cost <= w.limit) {
              retryAfterMs = Math.max(1, Math.ceil(hits.timeAt(k) + w.windowMs - now));
              break;
            }
          }
        }
        if (retryAfterMs === 0) retryAfterMs = w.windowMs;
      }
    }

    const values: (number | null)[] = [];
    const create: boolean[] = [];
    let missing = false;
    for (const [j, c] of counters.entries()) {
      const entry = this.live(c.key);
      if (entry !== undefined && entry.type !== 'string') throw new Error(WRONGTYPE);
      let value: number | null;
      if (c.reseed) value = c.seed!;
      else if (entry !== undefined) {
        if (!/^-?\d+$/.test(entry.value)) throw new Error('ERR value is not an integer or out of range');
        value = Number(entry.value);
      } else value = c.seed ?? null;
      create.push(c.reseed === true || (entry === undefined && value !== null));
      if (value === null) missing = true;
      values.push(value);
      if (value !== null && deniedIndex === -1 && value + c.amount > c.limit) deniedIndex = windows.length + j;
    }

    const outcome = deniedIndex !== -1 ? 'denied' : missing ? 'missing' : 'allowed';
    if (outcome === 'denied') {
      // As the script: a seeded counter is created (or rebuilt) at its seed even when the call is refused.
      for (const [j, c] of counters.entries()) {
        if (create[j]) this.write(c.key, { type: 'string', value: String(values[j]), expiresAt: this.now() + checkTtl(c.ttlMs) });
      }
    }
    let hit: string | null = null;
    if (outcome === 'allowed') {
      const seq = ++this.sequence;
      hit = hitId(seq);
      for (const [i, w] of windows.entries()) {
        const hits = logs[i];
        hits.add(now, w.cost, seq);
        sums[i] += w.cost;
        // The log goes when its newest hit leaves the window, as PEXPIREAT does in the script.
        this.write(w.key, { type: 'spend-log', hits, sum: sums[i], expiresAt: hits.newest() + w.windowMs });
      }
      for (const [j, c] of counters.entries()) {
        const value = values[j]! + c.amount;
        values[j] = value;
        const entry = create[j] ? undefined : this.live(c.key);
        // The expiry is set when the counter is created, never extended: a month ends on time.
        this.write(c.key, { type: 'string', value: String(value), expiresAt: entry?.expiresAt ?? this.now() + checkTtl(c.ttlMs) });
      }
    }
    return { outcome, retryAfterMs, deniedIndex, windows: sums, counters: values, hit };
  }

  /** lua/settle.lua, in one synchronous run. */
  async settle(windows: readonly SettleWindow[], counters: readonly SettleCounter[]): Promise<void> {
    this.open();
    checkSettle(windows, counters);
    for (const w of windows) {
      const entry = this.live(w.key);
      if (entry !== undefined && entry.type !== 'spend-log') throw new Error(WRONGTYPE);
      if (entry === undefined) continue;
      // Found by its id and cost, as the script finds its member; one that left the window is gone.
      const seq = seqOf(w.hit);
      const h = seq === undefined ? -1 : entry.hits.find(seq, w.from);
      if (h === -1 || w.from === w.to) continue;
      entry.hits.setCost(h, w.to);
      entry.sum += w.to - w.from;
    }
    for (const c of counters) {
      const entry = this.live(c.key);
      if (entry !== undefined && entry.type !== 'string') throw new Error(WRONGTYPE);
      if (entry === undefined || c.delta === 0) continue;
      if (!/^-?\d+$/.test(entry.value)) throw new Error('ERR value is not an integer or out of range');
      entry.value = String(Math.max(0, Number(entry.value) + c.delta));
    }
  }

  /** The steps of lua/breaker.lua (its header documents them), in one synchronous run. */
  async breaker(key: string, op: BreakerOp, params: BreakerParams, nowMs?: number, repeat = 1): Promise<BreakerDecision> {
    this.open();
    checkBreaker(op, params, nowMs, repeat);
    const p = params;
    const now = nowMs ?? Math.floor(this.now());
    const entry = this.live(key);
    if (entry !== undefined && entry.type !== 'breaker') throw new Error(WRONGTYPE);
    let { st, cf, op: openings, ou: openUntil, pu: probeUntil } = entry ?? { st: 0 as 0 | 1, cf: 0, op: 0, ou: 0, pu: 0 };
    // In place: a step that changes nothing only drops buckets that left the window, which no reader counts.
    const window = entry?.window ?? new Map<number, { n: number; f: number }>();

    const bucketMs = Math.max(1, Math.floor(p.windowMs / p.buckets));
    const current = Math.floor(now / bucketMs);
    const oldest = current - p.buckets + 1;
    let requests = 0;
    let failures = 0;
    for (const [idx, b] of window) {
      if (idx < oldest) window.delete(idx);
      else {
        requests += b.n;
        failures += b.f;
      }
    }

    let dirty = false;
    let opened = false;
    let permit: BreakerDecision['permit'] = null;
    const bump = (failed: boolean): void => {
      const b = window.get(current) ?? { n: 0, f: 0 };
      b.n += 1;
      if (failed) b.f += 1;
      window.set(current, b);
    };
    const openNow = (): void => {
      openings += 1;
      const duration = Math.min(p.maxOpenMs, p.baseOpenMs * 2 ** Math.min(openings - 1, 40));
      openUntil = now + Math.max(1, Math.floor(duration * (1 + p.jitter * (2 * p.random - 1))));
      st = 1;
      probeUntil = 0;
      window.clear();
      opened = true;
      dirty = true;
    };
    // As in the script, the rate rule is checked after every counted request, a success included.
    const count = (failed: boolean): void => {
      bump(failed);
      dirty = true;
      requests += 1;
      if (failed) failures += 1;
      if (cf >= p.failureThreshold || (requests >= p.minRequests && failures >= p.failureRatio * requests)) openNow();
    };
    const closedSuccess = (): void => {
      cf = 0;
      count(false);
    };
    const closedFailure = (): void => {
      cf += 1;
      count(true);
    };

    const halfOpen = st === 1 && now >= openUntil;
    switch (op) {
      case 'acquire':
        if (st === 0) permit = 'allow';
        else if (!halfOpen || probeUntil > now) permit = 'reject';
        else {
          probeUntil = now + p.probeLeaseMs;
          permit = 'probe';
          dirty = true;
        }
        break;
      case 'success':
        for (let i = 0; i < repeat && st === 0; i++) closedSuccess();
        break;
      case 'failure':
        if (st === 0) closedFailure();
        break;
      case 'probe_success':
        if (st === 0) closedSuccess();
        else if (halfOpen) {
          st = 0;
          cf = 0;
          openings = 0;
          openUntil = 0;
          probeUntil = 0;
          window.clear();
          dirty = true;
        }
        break;
      case 'probe_failure':
        if (st === 0) closedFailure();
        else if (halfOpen) {
          cf += 1;
          openNow();
        }
        break;
      case 'probe_release':
        if (halfOpen && probeUntil > now) {
          probeUntil = 0;
          dirty = true;
        }
        break;
      case 'state':
        break;
      default:
        assertUnreachable(op);
    }

    if (dirty) {
      // The hash expires ttlMs after its last write, plus what is left of the open time (PEXPIRE in the script).
      const expiresAt = now + p.ttlMs + Math.max(0, openUntil - now);
      this.write(key, { type: 'breaker', st, cf, op: openings, ou: openUntil, pu: probeUntil, window, expiresAt });
    }
    return {
      state: st === 0 ? 'closed' : now >= openUntil ? 'half_open' : 'open',
      permit,
      openUntil: st === 0 ? null : openUntil,
      consecutiveFailures: cf,
      openings,
      opened,
    };
  }

  async ping(_timeoutMs: number): Promise<void> {
    this.open();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    this.entries.clear();
  }

  /** Drops every expired entry; runs on the timer, and before evicting live ones. */
  sweep(): void {
    const now = this.now();
    this.lastSweepAt = now;
    for (const [key, entry] of this.entries) {
      if (expired(entry, now)) this.entries.delete(key);
    }
  }

  private open(): void {
    if (this.closed) throw new Error('cache store is closed');
  }

  private live(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry !== undefined && expired(entry, this.now())) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  private write(key: string, entry: Entry): void {
    // Re-inserting moves the key to the end of the Map's order, which is the eviction order.
    this.entries.delete(key);
    // A full store of live keys would otherwise pay a whole sweep on every write.
    if (this.entries.size >= this.maxEntries && this.now() - this.lastSweepAt >= 1_000) this.sweep();
    setBounded(this.entries, key, entry, this.maxEntries);
  }
}

/** A hit's member id, as spend answers it and settle is given it back. */
const hitId = (seq: number): string => `m${seq}`;

/** The sequence number of a member id of this store; undefined for any other string (it names no hit here). */
function seqOf(hit: string): number | undefined {
  if (hit.length < 2 || hit.charCodeAt(0) !== 0x6d /* m */) return undefined;
  const seq = Number(hit.slice(1));
  return Number.isSafeInteger(seq) && seq > 0 && hitId(seq) === hit ? seq : undefined;
}

/** Like Redis, a key is still there at the very millisecond it expires, and gone after. */
function expired(entry: Entry, now: number): boolean {
  return now > entry.expiresAt;
}
