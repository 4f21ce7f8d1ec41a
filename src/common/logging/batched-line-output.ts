import type { DestinationStream } from 'pino';

/** What the lines are written to: standard output by default (a `Writable` is one). */
export interface LineSink {
  write(chunk: string): boolean;
  /** Bytes the sink has taken but not yet handed to the operating system. */
  readonly writableLength: number;
  /** A stream's failures (a closed pipe: EPIPE); without a listener Node turns them into a crash. */
  on?(event: 'error', listener: (err: Error) => void): unknown;
}

export interface BatchedLineOutputOptions {
  /** Past this many bytes queued (in the sink and pending here) lines are dropped and counted. */
  maxQueuedBytes?: number;
  /** How long a line may wait for others to share its write. */
  lingerMs?: number;
  /** Pending lines of at least this many bytes go out right after the turn, whatever the linger. */
  flushBytes?: number;
}

/**
 * The process logger's destination: lines are written together, on the main thread, in one write
 * per `lingerMs` (20 ms by default), or right after the turn once `flushBytes` (64 KiB) are pending
 * (docs/architecture.md "Logging").
 *
 * Through `process.stdout` that is a plain write(2) whatever standard output is: a file is written
 * synchronously, and a pipe or socket (a container runtime's log collector) is tried at once and
 * queued only when it is full. pino's default destination makes one write per line, and its
 * asynchronous one hands every write to libuv's thread pool; a gateway answering one request at a
 * time writes one line per request, so either would be a system call (or a thread woken and a
 * completion posted back) per request. The linger timer is unreferenced (it never keeps the process
 * alive); what is pending is written on exit (see logger.ts), so only a process killed outright loses
 * its last lines, at most a linger's worth.
 *
 * A reader that stops reading (a frozen collector) cannot make the queue grow without bound: past
 * `maxQueuedBytes` lines are dropped and counted, and the count is reported through `onDropped` once
 * the queue has drained. A sink that fails (its reader closed the pipe) is written no more: its
 * error is reported once through `onBroken`, and the process goes on serving without logs.
 */
export class BatchedLineOutput implements DestinationStream {
  private pending = '';
  private timer: NodeJS.Timeout | undefined;
  private soon = false;
  private dropped = 0;
  private broken = false;
  private readonly maxQueuedBytes: number;
  private readonly lingerMs: number;
  private readonly flushBytes: number;
  /** Told how many lines were dropped, once writing works again (set after the logger exists). */
  onDropped: ((lines: number) => void) | undefined;
  /** Told once that the sink failed; by default a line on standard error. */
  onBroken: (err: Error) => void = (err) => {
    process.stderr.write(`gateway: standard output failed (${(err as NodeJS.ErrnoException).code ?? err.message}); log lines are dropped from now on\n`);
  };

  constructor(
    private readonly sink: LineSink = process.stdout,
    options: BatchedLineOutputOptions = {},
  ) {
    this.maxQueuedBytes = options.maxQueuedBytes ?? 8 * 1024 * 1024;
    this.lingerMs = options.lingerMs ?? 20;
    this.flushBytes = options.flushBytes ?? 64 * 1024;
    // Every error is taken (writes already queued fail too); the first is reported.
    sink.on?.('error', (err) => {
      if (this.broken) return;
      this.broken = true;
      this.pending = '';
      this.onBroken(err);
    });
  }

  write(line: string): void {
    if (this.broken) return;
    if (this.sink.writableLength + this.pending.length + line.length > this.maxQueuedBytes) {
      this.dropped++;
      return;
    }
    this.pending += line;
    if (this.pending.length >= this.flushBytes) {
      if (!this.soon) {
        this.soon = true;
        setImmediate(this.flushPending);
      }
    } else if (this.timer === undefined) {
      this.timer = setTimeout(this.flushPending, this.lingerMs);
      this.timer.unref();
    }
  }

  /** Writes what is pending now (pino's `logger.flush()`, and on process exit). */
  flush(cb?: (err?: Error) => void): void {
    this.flushPending();
    cb?.();
  }

  private readonly flushPending = (): void => {
    this.soon = false;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const out = this.pending;
    this.pending = '';
    if (out !== '' && !this.broken) this.sink.write(out);
    if (this.dropped > 0 && this.sink.writableLength === 0) {
      const lines = this.dropped;
      this.dropped = 0;
      this.onDropped?.(lines);
    }
  };
}
