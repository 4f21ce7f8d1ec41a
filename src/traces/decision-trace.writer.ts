import { BeforeApplicationShutdown, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Counter, Gauge } from 'prom-client';
import { AppLogger } from '../common/logging/logger';
import { stripUndefined } from '../common/options';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { withTimeout } from '../stores/with-timeout';
import { DecisionTrace, DecisionTraceSink } from './decision-trace';
import { TraceSpool } from './spool/trace-spool';
import { TraceSpoolConfig } from './spool/trace-spool.config';

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

type DropReason = 'buffer_full' | 'rejected' | 'shutdown' | 'spool_damaged';

const SPOOL_DEFAULTS = { replayPerSecond: 2_000, openRetryMs: 30_000 };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

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
 *
 * With the trace spool (TraceSpoolConfig; docs/operations.md "Store outages"), what the store cannot
 * take goes to disk instead: a batch whose write failed, every batch while the store breaker says the
 * store is out or the writer is backing off, the oldest waiting batches once half the buffer is full
 * (a slow store), and what is left at shutdown. Once the store answers, the spool is replayed oldest
 * first, in parallel with new traces, which go straight to the store: the learning loop, the
 * regression detector and the stop rules read the newest traces, and a backlog (rows keep their own
 * created_at) would only delay them. Replay is paced (`replayPerSecond`) and yields while a live batch
 * waits, so a long backlog neither crowds the store nor the request path. Beyond the spool's cap the
 * buffer drops as without it.
 */
@Injectable()
export class DecisionTraceWriter implements BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly queue = new Queue<DecisionTrace>();
  private inFlight = 0;
  private draining: Promise<void> | undefined;
  /** How many traces the running drain writes even as a batch short of full: what was waiting when the interval, a flush or the shutdown asked (see drain). */
  private owed = 0;
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
  private readonly spooledTotal: Counter;
  private readonly replayedTotal: Counter;
  /** The open spool; undefined when off, not opened yet, or held by another process. */
  private spool: TraceSpool | undefined;
  private spoolOpening: Promise<void> | undefined;
  private spoolRetryAt = 0;
  private readonly spoolSettings: (TraceSpoolConfig & typeof SPOOL_DEFAULTS) | undefined;
  /** The batch a drain is writing (shutdown spools it if the write outlives the flush). */
  private inFlightBatch: DecisionTrace[] | undefined;
  /** Traces being moved from the buffer to the spool. */
  private spilling = 0;
  private spill$: Promise<void> | undefined;
  private replaying: Promise<void> | undefined;
  private stopping = false;
  /** The store breaker was seen refusing calls: when it lets them through again, so does the writer, back-off or not. */
  private sawStoreOut = false;

  constructor(
    private readonly sink: DecisionTraceSink,
    metrics: MetricsService,
    logger: AppLogger,
    fallback: StoreFallback,
    @Optional() options?: DecisionTraceWriterOptions,
    @Optional() spoolConfig?: TraceSpoolConfig,
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
    const spoolBytes = () => this.spool?.bytes ?? 0;
    new Gauge({
      name: 'gateway_trace_spool_bytes',
      help: 'Bytes of decision traces in this replica\'s spool on disk, waiting to be replayed into the analytics store',
      registers: [metrics.registry],
      collect() {
        this.set(spoolBytes());
      },
    });
    this.spooledTotal = new Counter({ name: 'gateway_traces_spooled_total', help: 'Decision traces written to the spool because the analytics store was down or slow', registers: [metrics.registry] });
    this.replayedTotal = new Counter({ name: 'gateway_traces_replayed_total', help: 'Decision traces replayed from the spool into the analytics store', registers: [metrics.registry] });
    if (spoolConfig && spoolConfig.maxBytes > 0) {
      this.spoolSettings = { ...SPOOL_DEFAULTS, ...stripUndefined(spoolConfig) } as TraceSpoolConfig & typeof SPOOL_DEFAULTS;
      void this.openSpool();
    }
    this.timer = setInterval(() => this.tick(), this.o.flushIntervalMs);
    this.timer.unref();
  }

  /** Traces held now in memory (waiting, being written, or being moved to the spool). */
  get depth(): number {
    return this.queue.size + this.inFlight + this.spilling;
  }

  /** Bytes in the spool (0 without one). */
  get spooledBytes(): number {
    return this.spool?.bytes ?? 0;
  }

  /** Resolves once the spool is open (or failed to open); for start-up and tests. */
  async spoolReady(): Promise<boolean> {
    await this.spoolOpening;
    return this.spool !== undefined;
  }

  /**
   * Replays the spool now as far as the store takes it (paced as always); resolves when the spool is
   * empty or a write failed. For tests and the bench; the writer replays on its own.
   */
  async replay(): Promise<void> {
    await this.spoolOpening;
    if (this.replaying) await this.replaying;
    this.retryAt = 0;
    await this.startReplay();
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
      // A slow store: the oldest waiting batches go to disk rather than toward the drop above.
      if (this.spool && this.queue.size * 2 >= this.o.maxBuffered && this.queue.size >= this.o.batchSize && !this.spill$) this.spill();
      if (this.queue.size >= this.o.batchSize && !this.draining && !this.scheduled && (this.now() >= this.retryAt || this.spool)) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          void this.drain(false);
        });
      }
    } catch {
      // Nothing a trace does may fail the request that produced it.
    }
  }

  /**
   * Writes what is buffered now, ignoring any back-off. Resolves when those traces are written or a
   * write failed (the traces then stay buffered for the next attempt); never rejects. Traces recorded
   * meanwhile are written only as whole batches.
   */
  async flush(): Promise<void> {
    if (this.draining) await this.draining;
    this.retryAt = 0;
    await this.drain();
  }

  /**
   * SIGTERM (docs/architecture.md "Graceful shutdown"): write what can be written within a bound, before the stores close.
   * With the spool, what is left goes to disk and is replayed by the next process on this data dir.
   */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    this.stopping = true;
    try {
      await withTimeout(
        (async () => {
          await this.spoolOpening;
          await this.flush();
          // Requests still finishing record traces while it writes: written too, while each flush leaves
          // fewer (after the first, whatever arrived during it: they may outnumber what it wrote).
          for (let left = Infinity; this.failures === 0 && this.queue.size > 0 && this.queue.size < left; ) {
            left = this.queue.size;
            await this.flush();
          }
          await this.replaying;
          await this.spill$;
        })(),
        this.o.shutdownTimeoutMs,
        'decision trace flush',
      );
    } catch {
      // Reported below as what was left.
    }
    this.closed = true;
    if (this.spool) {
      // A batch whose write outlived the flush may still commit: spooled too, its second copy is
      // ignored by the store's idempotent insert (one row per trace id).
      const left = [...(this.inFlightBatch ?? []), ...this.queue.take(this.queue.size)];
      if (left.length > 0 && (await this.toSpool(left))) {
        this.inFlight = 0;
        this.inFlightBatch = undefined;
      } else this.queue.unshiftAll(left.slice(this.inFlightBatch?.length ?? 0));
      await this.spool.close().catch((err) => this.fallback.warn('decision-traces:spool', err));
    }
    const left = this.depth;
    if (left > 0) this.drop(left, 'shutdown');
    this.logDrops(true);
  }

  private tick(): void {
    const available = this.spoolSettings?.store?.available;
    if (available === false) this.sawStoreOut = true;
    else if (available && this.sawStoreOut) {
      // The breaker's probe saw the store answer: no need to wait out this writer's own back-off.
      this.sawStoreOut = false;
      this.retryAt = 0;
    }
    if (!this.draining && this.queue.size > 0 && (this.now() >= this.retryAt || this.spool)) void this.drain();
    if (this.spool?.hasBacklog && !this.storeOut()) void this.startReplay();
    if (this.spoolSettings && !this.spool && !this.spoolOpening && !this.stopping && this.now() >= this.spoolRetryAt) void this.openSpool();
    this.logDrops(false);
  }

  /** The store is known to be out: its breaker refuses calls, or the last write failed and its back-off has not passed. */
  private storeOut(): boolean {
    return this.spoolSettings?.store?.available === false || this.now() < this.retryAt;
  }

  private openSpool(): Promise<void> {
    const s = this.spoolSettings!;
    this.spoolOpening ??= TraceSpool.open({ dir: s.dir, maxBytes: s.maxBytes, segmentBytes: s.segmentBytes, fsyncIntervalMs: s.fsyncIntervalMs })
      .then((spool) => {
        if (this.stopping) return spool.close();
        this.spool = spool;
        if (spool.hasBacklog) this.log.warn({ topic: 'decision-traces:spool', dir: spool.dir, bytes: spool.bytes }, 'trace spool holds traces from an earlier run: replaying them once the analytics store answers');
      })
      .catch((err) => {
        // Another process on this data dir holds it (or the folder cannot be written): traces are
        // held in memory only, as without a spool, and opening is tried again later.
        this.spoolRetryAt = this.now() + s.openRetryMs;
        this.fallback.warn('decision-traces:spool', err, { effect: 'traces held in memory only', retry_in_ms: s.openRetryMs });
      })
      .finally(() => {
        this.spoolOpening = undefined;
      });
    return this.spoolOpening;
  }

  /** Appends to the spool; false (nothing written) when it cannot take them. */
  private async toSpool(traces: DecisionTrace[]): Promise<boolean> {
    const spool = this.spool;
    if (!spool) return false;
    const ok = await spool.append(traces);
    if (ok) this.spooledTotal.inc(traces.length);
    else if (spool.lastError) this.fallback.warn('decision-traces:spool', spool.lastError, { spool_bytes: spool.bytes });
    return ok;
  }

  /** Moves the oldest waiting batches to the spool while the buffer is over half full. */
  private spill(): void {
    this.spill$ = (async () => {
      while (this.spool && !this.closed && this.queue.size >= this.o.batchSize && this.queue.size * 2 >= this.o.maxBuffered) {
        const batch = this.queue.take(this.o.batchSize);
        this.spilling = batch.length;
        const ok = await this.toSpool(batch);
        this.spilling = 0;
        if (!ok) {
          this.requeue(batch);
          return;
        }
      }
    })().finally(() => {
      this.spill$ = undefined;
    });
  }

  private startReplay(): Promise<void> {
    this.replaying ??= this.replayAll().finally(() => {
      this.replaying = undefined;
    });
    return this.replaying;
  }

  /** Replays the spool oldest first while the store takes it; a batch is committed (its segment deleted once whole) only after its rows are. */
  private async replayAll(): Promise<void> {
    const spool = this.spool;
    const perSecond = this.spoolSettings?.replayPerSecond ?? SPOOL_DEFAULTS.replayPerSecond;
    while (spool && !this.closed && !this.stopping && spool.hasBacklog && !this.storeOut()) {
      // Live traces first: a waiting batch goes before the backlog's next one.
      if (this.queue.size >= this.o.batchSize) {
        await sleep(Math.max(1, this.o.flushIntervalMs / 10));
        continue;
      }
      const started = Date.now();
      let batch;
      try {
        batch = await spool.next(this.o.batchSize);
      } catch (err) {
        this.fallback.warn('decision-traces:spool', err);
        await spool.rewind();
        return;
      }
      if (!batch) return;
      if (batch.damaged > 0) this.drop(batch.damaged, 'spool_damaged');
      if (batch.traces.length > 0) {
        const { unwritten, written } = await this.writeBatch(batch.traces, false);
        this.replayedTotal.inc(written);
        if (unwritten.length > 0) {
          // Read again from the last commit once the store is back; what this batch did write is
          // ignored by the idempotent insert then.
          await spool.rewind();
          return;
        }
      }
      await batch.commit();
      const due = (batch.traces.length / perSecond) * 1000 - (Date.now() - started);
      if (due > 0) await sleep(due);
    }
  }

  /**
   * Writes what is waiting: everything waiting now (the interval, flush, shutdown), or, when a batch
   * filled up, whole batches only; in both cases what arrives during the writes is written only as
   * whole batches. Under load a drain that went on until the buffer was empty wrote whatever had
   * arrived during its last write, a few dozen traces per INSERT, each paying the store's cost per
   * statement and commit; the rest now waits for the next full batch or the interval.
   */
  private drain(all = true): Promise<void> {
    if (all) this.owed = this.queue.size;
    this.draining ??= this.writeAll().finally(() => {
      this.draining = undefined;
      this.owed = 0;
    });
    return this.draining;
  }

  private async writeAll(): Promise<void> {
    while (this.queue.size > 0 && !this.closed) {
      if (this.owed <= 0 && this.queue.size < this.o.batchSize) return;
      const batch = this.queue.take(this.o.batchSize);
      this.owed -= batch.length;
      this.inFlight = batch.length;
      this.inFlightBatch = batch;
      let unwritten: DecisionTrace[];
      try {
        // The store known to be out: straight to the spool, without a call that would only fail.
        unwritten = this.spool && this.storeOut() ? batch : (await this.writeBatch(batch, true)).unwritten;
        if (unwritten.length > 0 && (await this.toSpool(unwritten))) unwritten = [];
      } finally {
        this.inFlight = 0;
        this.inFlightBatch = undefined;
      }
      if (unwritten.length > 0) {
        this.requeue(unwritten);
        return;
      }
    }
  }

  /**
   * Writes one batch. A batch the store refuses is split in halves until the refused traces are
   * isolated and dropped (counted), so one bad trace never costs its neighbours. On any other
   * failure the next attempt backs off, and what is unwritten is handed back (to the head of the
   * buffer, or to the spool). `live`: the batch is counted in `inFlight` (a replayed one is on disk).
   */
  private async writeBatch(batch: DecisionTrace[], live: boolean): Promise<{ unwritten: DecisionTrace[]; written: number }> {
    const stack: DecisionTrace[][] = [batch];
    let written = 0;
    while (stack.length > 0) {
      const part = stack.pop()!;
      try {
        await this.sink.write(part);
        this.written.inc(part.length);
        written += part.length;
        if (live) this.inFlight -= part.length;
        this.failures = 0;
      } catch (err) {
        if (isRejection(err)) {
          if (part.length === 1) {
            if (live) this.inFlight -= 1;
            this.drop(1, 'rejected');
            this.fallback.warn('decision-traces:rejected', err);
          } else {
            const mid = Math.ceil(part.length / 2);
            stack.push(part.slice(mid), part.slice(0, mid));
          }
          continue;
        }
        const unwritten = [part, ...stack.reverse()].flat();
        this.failures++;
        this.retryAt = this.now() + Math.min(this.o.maxBackoffMs, this.o.flushIntervalMs * 2 ** Math.min(this.failures - 1, 20));
        this.writeFailures.inc();
        this.fallback.failed('analytics', 'analytics-store:decision-traces', err, { buffered: this.queue.size + (live ? unwritten.length : 0), retry_in_ms: this.retryAt - this.now() });
        return { unwritten, written };
      }
    }
    return { unwritten: [], written };
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
