import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import type { Logger } from 'pino';
import { ThrottledWarning } from '../../common/logging/throttled-warning';
import { StoreTimeoutError, withTimeout } from '../with-timeout';
import { checkBreaker, checkLimit, checkSettle, checkSpend, checkTtl, checkWindows, sumKeyOf } from './cache-input';
import {
  BreakerDecision, BreakerOp, BreakerParams, BreakerState, CacheStore, CounterDecision, SettleCounter, SettleWindow, SpendCounter, SpendDecision, SpendWindow,
  WindowCheck, WindowDecision,
} from './cache-store';

export interface RedisCacheStoreOptions {
  url: string;
  /** Connection errors are logged here at most once per interval. */
  logger?: Logger;
  /** Upper bound of every call, the scripts' EVALSHA → EVAL fallback included. */
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Cap of the reconnect back-off. */
  maxReconnectDelayMs?: number;
}

/** The scripts under ./lua, registered with `defineCommand` (EVALSHA, EVAL on NOSCRIPT). */
interface ScriptedRedis extends Redis {
  hitWindows(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  incrementBelow(key: string, limit: number, ttlMs: number): Promise<[number, number]>;
  breaker(key: string, ...args: (string | number)[]): Promise<number[]>;
  spend(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  settle(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
}

const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half_open'];
const BREAKER_PERMITS = [null, 'allow', 'probe', 'reject'] as const;

// Read once per process: the files ship beside the compiled code (nest-cli.json copies stores/**/*.lua).
let scripts: { hitWindows: string; incrementBelow: string; breaker: string; spend: string; settle: string } | undefined;
function loadScripts(): NonNullable<typeof scripts> {
  scripts ??= {
    hitWindows: readFileSync(join(__dirname, 'lua', 'hit-windows.lua'), 'utf8'),
    incrementBelow: readFileSync(join(__dirname, 'lua', 'increment-below.lua'), 'utf8'),
    breaker: readFileSync(join(__dirname, 'lua', 'breaker.lua'), 'utf8'),
    spend: readFileSync(join(__dirname, 'lua', 'spend.lua'), 'utf8'),
    settle: readFileSync(join(__dirname, 'lua', 'settle.lua'), 'utf8'),
  };
  return scripts;
}

/**
 * Cache store on Redis. A dead or slow Redis must never hang a request or crash the
 * process (docs/architecture.md "Degrade, never hang"): no offline queue, so calls fail fast while disconnected; every call is
 * capped by a timeout; connection errors are swallowed by a listener and logged, throttled; the
 * client keeps reconnecting in the background with a capped back-off.
 */
export class RedisCacheStore extends CacheStore {
  readonly kind = 'redis' as const;
  private readonly client: ScriptedRedis;
  private readonly timeoutMs: number;
  /** Members of the sliding logs must be unique across replicas: a random instance id plus a sequence. */
  private readonly instanceId = randomBytes(8).toString('hex');
  private sequence = 0;
  /**
   * Pending until the first connection attempt succeeds or fails. Without an offline queue, a call
   * made in the first milliseconds after start-up would fail although Redis is fine; such calls wait
   * for that first attempt instead (still within their timeout).
   */
  private firstAttempt: Promise<void> | undefined;

  constructor(options: RedisCacheStoreOptions) {
    super();
    this.timeoutMs = options.commandTimeoutMs ?? 500;
    const maxDelay = options.maxReconnectDelayMs ?? 5_000;
    const client = new Redis(options.url, {
      enableOfflineQueue: false,
      connectTimeout: options.connectTimeoutMs ?? 1_000,
      // A backstop that frees a command Redis never answers. The call's own bound is `run`'s
      // withTimeout, which lets an answer already in the socket be read first; ioredis's timer,
      // if it fired at the same moment, would reject before that read, so it is set later.
      commandTimeout: this.timeoutMs * 2,
      maxRetriesPerRequest: 1,
      // A hit or an increment whose reply was lost may already have been applied: resending it
      // after a reconnect could spend a limit twice.
      autoResendUnfulfilledCommands: false,
      // Jitter keeps replicas from reconnecting in lock-step after an outage.
      retryStrategy: (attempt) => Math.round(Math.min(maxDelay, 50 * 2 ** Math.min(attempt, 16)) * (0.75 + Math.random() * 0.5)),
    }) as ScriptedRedis;
    const lua = loadScripts();
    client.defineCommand('hitWindows', { lua: lua.hitWindows });
    client.defineCommand('incrementBelow', { numberOfKeys: 1, lua: lua.incrementBelow });
    client.defineCommand('breaker', { numberOfKeys: 1, lua: lua.breaker });
    client.defineCommand('spend', { lua: lua.spend });
    client.defineCommand('settle', { lua: lua.settle });

    const warning = options.logger ? new ThrottledWarning(options.logger) : undefined;
    // Without a listener ioredis dumps every failed reconnect to stderr as an "Unhandled error event";
    // an outage is logged once per interval instead, and callers see it as rejected calls.
    client.on('error', (err: Error) => warning?.warn('cache-store.redis', err));

    this.firstAttempt = new Promise<void>((resolve) => {
      const settle = (): void => {
        for (const event of ['ready', 'error', 'close', 'end']) client.off(event, settle);
        this.firstAttempt = undefined;
        resolve();
      };
      for (const event of ['ready', 'error', 'close', 'end']) client.once(event, settle);
    });
    this.client = client;
  }

  get(key: string): Promise<string | null> {
    return this.run('get', () => this.client.get(key));
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const ttl = checkTtl(ttlMs);
    await this.run('set', () => this.client.set(key, value, 'PX', ttl));
  }

  async del(...keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.run('del', () => this.client.del(...keys));
  }

  async spend(windows: readonly SpendWindow[], counters: readonly SpendCounter[]): Promise<SpendDecision> {
    checkSpend(windows, counters);
    const keys: string[] = [];
    for (const w of windows) keys.push(w.key, sumKeyOf(w.key));
    for (const c of counters) keys.push(c.key);
    const hit = this.nextMember();
    const args: (string | number)[] = [...keys, windows.length, counters.length, hit];
    for (const w of windows) args.push(w.limit, w.windowMs, w.cost);
    for (const c of counters) args.push(c.limit, c.amount, Math.ceil(c.ttlMs), c.seed ?? -1, c.reseed ? 1 : 0);
    const reply = (await this.run('spend', () => this.client.spend(keys.length, ...args))).map(Number);
    const outcome = reply[0] === 1 ? 'allowed' : reply[0] === 2 ? 'missing' : 'denied';
    return {
      outcome,
      retryAfterMs: reply[1],
      deniedIndex: reply[2],
      windows: reply.slice(3, 3 + windows.length),
      counters: reply.slice(3 + windows.length).map((v) => (v < 0 ? null : v)),
      hit: outcome === 'allowed' ? hit : null,
    };
  }

  async settle(windows: readonly SettleWindow[], counters: readonly SettleCounter[]): Promise<void> {
    checkSettle(windows, counters);
    const keys: string[] = [];
    for (const w of windows) keys.push(w.key, sumKeyOf(w.key));
    for (const c of counters) keys.push(c.key);
    const args: (string | number)[] = [...keys, windows.length, counters.length];
    for (const w of windows) args.push(w.hit, w.from, w.to);
    for (const c of counters) args.push(c.delta);
    await this.run('settle', () => this.client.settle(keys.length, ...args));
  }

  async hitWindows(checks: readonly WindowCheck[]): Promise<WindowDecision> {
    checkWindows(checks);
    const args: (string | number)[] = checks.map((c) => c.key);
    for (const c of checks) args.push(c.limit, c.windowMs);
    args.push(this.nextMember());
    const reply = await this.run('hitWindows', () => this.client.hitWindows(checks.length, ...args));
    return {
      allowed: reply[0] === 1,
      retryAfterMs: Number(reply[1]),
      deniedIndex: Number(reply[2]),
      counts: reply.slice(3).map(Number),
    };
  }

  async incrementBelow(key: string, limit: number, ttlMs: number): Promise<CounterDecision> {
    checkLimit(limit);
    const ttl = checkTtl(ttlMs);
    const [allowed, value] = await this.run('incrementBelow', () => this.client.incrementBelow(key, limit, ttl));
    return { allowed: allowed === 1, value: Number(value) };
  }

  async breaker(key: string, op: BreakerOp, params: BreakerParams, nowMs?: number, repeat = 1): Promise<BreakerDecision> {
    checkBreaker(op, params, nowMs, repeat);
    const p = params;
    const reply = await this.run('breaker', () =>
      this.client.breaker(
        key,
        op,
        nowMs === undefined ? '' : nowMs,
        p.failureThreshold,
        p.windowMs,
        p.buckets,
        p.minRequests,
        p.failureRatio,
        p.baseOpenMs,
        p.maxOpenMs,
        p.jitter,
        p.random,
        p.probeLeaseMs,
        p.ttlMs,
        repeat,
      ),
    );
    const [state, permit, openUntil, consecutiveFailures, openings, opened] = reply.map(Number);
    return {
      state: BREAKER_STATES[state],
      permit: BREAKER_PERMITS[permit],
      openUntil: state === 0 ? null : openUntil,
      consecutiveFailures,
      openings,
      opened: opened === 1,
    };
  }

  async ping(timeoutMs: number): Promise<void> {
    await this.run('ping', () => this.client.ping(), timeoutMs);
  }

  async close(): Promise<void> {
    if (this.client.status === 'end') return;
    if (this.client.status === 'ready') {
      try {
        await withTimeout(this.client.quit(), this.timeoutMs, 'redis quit');
        return;
      } catch {
        // Fall through: a dead connection cannot say goodbye.
      }
    }
    this.client.disconnect();
  }

  /** A member of a sliding log, unique across replicas. */
  private nextMember(): string {
    return `${this.instanceId}:${(this.sequence = (this.sequence + 1) % Number.MAX_SAFE_INTEGER)}`;
  }

  /** Runs one call within `timeoutMs`; a call that timed out while waiting to start is never sent. */
  private run<T>(what: string, call: () => Promise<T>, timeoutMs = this.timeoutMs): Promise<T> {
    let expired = false;
    const work = this.firstAttempt
      ? this.firstAttempt.then(() => {
          if (expired) throw new StoreTimeoutError(`redis ${what}`, timeoutMs);
          return call();
        })
      : call();
    return withTimeout(work, timeoutMs, `redis ${what}`).catch((err: unknown) => {
      expired = true;
      throw err;
    });
  }
}
