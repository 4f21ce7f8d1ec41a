import { BeforeApplicationShutdown, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Counter, Gauge } from 'prom-client';
import { AppLogger } from '../common/logging/logger';
import { stripUndefined } from '../common/options';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { withTimeout } from '../stores/with-timeout';
import { DecisionTrace, DecisionTraceSink } from './decision-trace';

export type { DecisionTrace } from './decision-trace';

export class DecisionTraceWriterOptions {
  /** Traces held at most (buffered and being written); beyond it the oldest are dropped and counted. */
  maxBuffered?: number;
  /** Traces per INSERT; this many waiting starts a write at once. */
  batchSize?: number;
  /** Whatever is waiting is written at least this often. */
  flushIntervalMs?: number;
  /** Cap of the back-off between failed writes (it doubles from flushIntervalMs). */
  maxBackoffMs?: number;
  /** How long shutdown may spend writing what is left. */
  shutdownTimeoutMs?: number;
  /** Drops and write failures are logged at most once per this interval. */
  logIntervalMs?: number;
  now?: () => number;
}

const DEFAULTS = {
  maxBuffered: 10_000,
  batchSize: 500,
  flushIntervalMs: 1_000,
  maxBackoffMs: 30_000,
  shutdownTimeoutMs: 5_000,
  logIntervalMs: 30_000,
};

type DropReason = 'buffer_full' | 'rejected' | 'shutdown';

/**
 * SQLSTATE classes that say the batch itself is at fault (data exception, integrity, syntax or
 * schema): writing it again cannot succeed. Anything else (connection, timeout, shutdown of the
 * server) is worth retrying.
 */
function isRejection(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22|23|42)[0-9A-Z]{3}$/.test(code);
}

/** FIFO with O(1) removal at the head (a plain array's shift() is O(n) at 10,000 entries). */
class Queue<T> {
  private items: T[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined as T;
    if (this.head > 1_024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  take(n: number): T[] {
    const out = this.items.slice(this.head, this.head + n);
    for (let i = 0; i < out.length; i++) this.shift();
    return out;
  }

  /** Puts items back at the head, in order (a batch whose write failed). */
  unshiftAll(front: readonly T[]): void {
    this.items = [...front, ...this.items.slice(this.head)];
    this.head = 0;
  }
}

/**
 * Decision traces off the hot path (docs/architecture.md "Decision traces off the hot path"): `record` appends to a bounded in-process buffer;
 * batches are written with one INSERT each, every interval or as soon as a batch is waiting. When
 * the analytics store is down the writer retries with back-off and keeps what fits; what it must
 * drop (the oldest first) is counted in metrics and logged with its number, never lost silently.
 */
@Injectable()
export class DecisionTraceWriter implements BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly queue = new Queue<DecisionTrace>();
  private inFlight = 0;
  private draining: Promise<void> | undefined;
  private failures = 0;
  private retryAt = 0;
  private closed = false;
  private scheduled = false;
  private readonly timer: NodeJS.Timeout;
  private readonly log: Logger;
  private readonly fallback: StoreFallback;
  private droppedSinceLog = 0;
  private droppedTotal = 0;
  private lastDropLog = -Infinity;
  private readonly written: Counter;
  private readonly dropped: Counter<'reason'>;
  private readonly writeFailures: Counter;

  constructor(
    private readonly sink: DecisionTraceSink,
    metrics: MetricsService,
    logger: AppLogger,
    fallback: StoreFallback,
    @Optional() options?: DecisionTraceWriterOptions,
  ) {
    const given = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given } as typeof DEFAULTS;
    this.o.maxBuffered = Math.max(1, this.o.maxBuffered);
    this.o.batchSize = Math.max(1, Math.min(this.o.batchSize, this.o.maxBuffered));
    this.now = given.now ?? Date.now;
    this.log = logger.pino;
    this.fallback = fallback.withLogInterval(this.o.logIntervalMs);
    // Read when scraped, so record() pays nothing for it.
    const depth = () => this.depth;
    new Gauge({
      name: 'gateway_trace_buffer_depth',
      help: 'Decision traces held in this replica, waiting or being written',
      registers: [metrics.registry],
      collect() {
        this.set(depth());
      },
    });
    this.written = new Counter({ name: 'gateway_traces_written_total', help: 'Decision traces written to the analytics store', registers: [metrics.registry] });
    this.dropped = new Counter({
      name: 'gateway_traces_dropped_total',
      help: 'Decision traces dropped: buffer_full (oldest dropped while the store was down), rejected (refused by the store), shutdown (left at exit)',
      labelNames: ['reason'] as const,
      registers: [metrics.registry],
    });
    this.writeFailures = new Counter({ name: 'gateway_trace_write_failures_total', help: 'Failed decision-trace batch writes (retried)', registers: [metrics.registry] });
    this.timer = setInterval(() => this.tick(), this.o.flushIntervalMs);
    this.timer.unref();
  }

  /** Traces held now (waiting or being written). */
  get depth(): number {
    return this.queue.size + this.inFlight;
  }

  /** Queues one trace; never blocks, never throws. */
  record(trace: DecisionTrace): void {
    try {
      if (this.closed) {
        this.drop(1, 'shutdown');
        return;
      }
      if (this.depth >= this.o.maxBuffered) {
        // Drop the oldest: the newest traces are the ones feedback is about to be joined to.
        if (this.queue.size > 0) this.queue.shift();
        else {
          this.drop(1, 'buffer_full');
          return;
        }
        this.drop(1, 'buffer_full');
      }
      this.queue.push(trace);
      if (this.queue.size >= this.o.batchSize && !this.draining && !this.scheduled && this.now() >= this.retryAt) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          void this.drain();
        });
      }
    } catch {
      // Nothing a trace does may fail the request that produced it.
    }
  }

  /**
   * Writes what is buffered now, ignoring any back-off. Resolves when the buffer is empty or a write
   * failed (the traces then stay buffered for the next attempt); never rejects.
   */
  async flush(): Promise<void> {
    if (this.draining) await this.draining;
    this.retryAt = 0;
    await this.drain();
  }

  /** SIGTERM (docs/architecture.md "Graceful shutdown"): write what can be written within a bound, before the stores close. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    try {
      await withTimeout(this.flush(), this.o.shutdownTimeoutMs, 'decision trace flush');
    } catch {
      // Reported below as what was left.
    }
    this.closed = true;
    const left = this.depth;
    if (left > 0) this.drop(left, 'shutdown');
    this.logDrops(true);
  }

  private tick(): void {
    if (!this.draining && this.queue.size > 0 && this.now() >= this.retryAt) void this.drain();
    this.logDrops(false);
  }

  private drain(): Promise<void> {
    this.draining ??= this.writeAll().finally(() => {
      this.draining = undefined;
    });
    return this.draining;
  }

  private async writeAll(): Promise<void> {
    while (this.queue.size > 0 && !this.closed) {
      const batch = this.queue.take(this.o.batchSize);
      this.inFlight = batch.length;
      let ok: boolean;
      try {
        ok = await this.writeBatch(batch);
      } finally {
        this.inFlight = 0;
      }
      if (!ok) return;
    }
  }

  /**
   * Writes one batch. A batch the store refuses is split in halves until the refused traces are
   * isolated and dropped (counted), so one bad trace never costs its neighbours. On any other
   * failure what is unwritten goes back to the head of the buffer and the next attempt backs off.
   */
  private async writeBatch(batch: DecisionTrace[]): Promise<boolean> {
    const stack: DecisionTrace[][] = [batch];
    while (stack.length > 0) {
      const part = stack.pop()!;
      try {
        await this.sink.write(part);
        this.written.inc(part.length);
        this.inFlight -= part.length;
        this.failures = 0;
      } catch (err) {
        if (isRejection(err)) {
          if (part.length === 1) {
            this.inFlight -= 1;
            this.drop(1, 'rejected');
            this.fallback.warn('decision-traces:rejected', err);
          } else {
            const mid = Math.ceil(part.length / 2);
            stack.push(part.slice(mid), part.slice(0, mid));
          }
          continue;
        }
        this.requeue([part, ...stack.reverse()].flat());
        this.failures++;
        this.retryAt = this.now() + Math.min(this.o.maxBackoffMs, this.o.flushIntervalMs * 2 ** Math.min(this.failures - 1, 20));
        this.writeFailures.inc();
        this.fallback.failed('analytics', 'analytics-store:decision-traces', err, { buffered: this.queue.size, retry_in_ms: this.retryAt - this.now() });
        return false;
      }
    }
    return true;
  }

  /** Unwritten traces go back to the head; if new ones filled the buffer meanwhile, the oldest go. */
  private requeue(unwritten: DecisionTrace[]): void {
    this.inFlight = 0;
    this.queue.unshiftAll(unwritten);
    const over = this.queue.size - this.o.maxBuffered;
    if (over > 0) {
      this.queue.take(over);
      this.drop(over, 'buffer_full');
    }
  }

  private drop(n: number, reason: DropReason): void {
    this.dropped.inc({ reason }, n);
    this.droppedSinceLog += n;
    this.droppedTotal += n;
    this.logDrops(false);
  }

  /** One line per interval with how many were dropped since the last line; at shutdown, always. */
  private logDrops(force: boolean): void {
    if (this.droppedSinceLog === 0) return;
    const now = this.now();
    if (!force && now - this.lastDropLog < this.o.logIntervalMs) return;
    this.lastDropLog = now;
    this.log.warn(
      { topic: 'decision-traces', dropped: this.droppedSinceLog, dropped_total: this.droppedTotal, buffered: this.depth },
      'decision traces dropped',
    );
    this.droppedSinceLog = 0;
  }
}
