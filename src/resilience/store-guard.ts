import type { Logger } from 'pino';
import { errorMessage } from '../common/errors/error-message';
import { StoreTimeoutError, withTimeout } from '../stores/with-timeout';

/** A call refused without reaching the store: an earlier call found it dead or frozen, and no probe has seen it answer since. */
export class StoreUnavailableError extends Error {
  constructor(readonly store: string, since: number) {
    super(`the ${store} store is unavailable (no answer since ${new Date(since).toISOString()}); calls are refused until a probe succeeds`);
    this.name = 'StoreUnavailableError';
  }
}

export interface StoreGuardOptions {
  /** `cache` or `analytics`: the label of logs and metrics. */
  store: string;
  /** Asks the store whether it answers; resolves or rejects within `probeTimeoutMs`. */
  ping(timeoutMs: number): Promise<void>;
  /** How often an unavailable store is probed. */
  probeIntervalMs: number;
  probeTimeoutMs: number;
  /**
   * True for an error that says the store is gone or frozen (a timeout, a refused or dropped
   * connection), false for one the store answered with (a constraint violation, a script error):
   * only the first kind marks the store unavailable.
   */
  isOutage(err: unknown): boolean;
  logger?: Logger;
  /** Told each change of availability (metrics). */
  onChange?(available: boolean): void;
  now?: () => number;
}

/**
 * A per-replica breaker around one store client (docs/operations.md "Store outages"). While the
 * store answers, calls go through. The first call that fails for an outage (a timeout, a refused or
 * dropped connection) marks it unavailable: from then on every call is refused at once with
 * StoreUnavailableError, so the caller's fallback runs without waiting, and a background probe pings
 * the store (at once, then every `probeIntervalMs`) until it answers, which lets calls through again. A frozen store
 * therefore costs the requests in flight when it froze one timeout each, and no request after them.
 *
 * Calls already in flight when the store is marked unavailable are left to finish or time out on
 * their own: a write cut short here could still commit on the server, and its caller would then
 * retry it (a trace batch written twice).
 */
export class StoreGuard {
  private unavailableSince: number | null = null;
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private closed = false;
  private readonly now: () => number;

  constructor(private readonly o: StoreGuardOptions) {
    this.now = o.now ?? Date.now;
  }

  get available(): boolean {
    return this.unavailableSince === null;
  }

  /**
   * Runs `call` unless the store is marked unavailable. `deadlineMs` bounds the wait for this call
   * alone (a request-path read), on top of the client's own timeouts; exceeding it counts as an outage.
   */
  async run<T>(call: () => Promise<T>, deadlineMs?: number): Promise<T> {
    if (this.unavailableSince !== null) throw new StoreUnavailableError(this.o.store, this.unavailableSince);
    try {
      return await (deadlineMs === undefined ? call() : withTimeout(call(), deadlineMs, `${this.o.store} store`));
    } catch (err) {
      if (err instanceof StoreTimeoutError || this.o.isOutage(err)) this.markUnavailable(err);
      throw err;
    }
  }

  /** Marks the store unavailable (idempotent) and starts probing it. */
  markUnavailable(reason: unknown): void {
    if (this.unavailableSince !== null || this.closed) return;
    this.unavailableSince = this.now();
    this.o.logger?.warn({ topic: `${this.o.store}-store`, reason: errorMessage(reason), probe_interval_ms: this.o.probeIntervalMs }, 'store unavailable: calls refused until a probe succeeds');
    this.o.onChange?.(false);
    // The first probe goes at once: a timeout may have been this process's own stall (a long
    // garbage collection, a starved CPU) rather than the store's, and then the store is back in
    // one round trip instead of one probe interval.
    this.scheduleProbe(0);
  }

  /** Stops probing; later calls are still refused while the store is marked unavailable. */
  close(): void {
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }

  private scheduleProbe(delayMs = this.o.probeIntervalMs): void {
    if (this.closed || this.probeTimer) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.probe();
    }, delayMs);
    this.probeTimer.unref();
  }

  private async probe(): Promise<void> {
    if (this.closed || this.probing || this.unavailableSince === null) return;
    this.probing = true;
    try {
      await this.o.ping(this.o.probeTimeoutMs);
      if (this.closed) return;
      const downMs = this.now() - this.unavailableSince;
      this.unavailableSince = null;
      this.o.logger?.warn({ topic: `${this.o.store}-store`, unavailable_ms: downMs }, 'store available again');
      this.o.onChange?.(true);
    } catch {
      this.scheduleProbe();
    } finally {
      this.probing = false;
    }
  }
}
