import type { DestinationStream } from 'pino';

/** What the lines are written to: standard output by default (a `Writable` is one). */
export interface LineSink {
  write(chunk: string): boolean;
  /** Bytes the sink has taken but not yet handed to the operating system. */
  readonly writableLength: number;
  /** A stream's failures (a closed pipe: EPIPE); without a listener Node turns them into a crash. */
  on?(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * The process logger's destination: the lines of one event-loop turn go out together in one write,
 * right after the turn, on the main thread (docs/architecture.md "Logging").
 *
 * Through `process.stdout` that is a plain write(2) whatever standard output is: a file is written
 * synchronously, and a pipe or socket (a container runtime's log collector) is tried at once and
 * queued only when it is full. pino's asynchronous destination hands every write to libuv's thread
 * pool instead, and a gateway answering one request at a time writes one line per request: a thread
 * woken and a completion posted back to the event loop for each.
 *
 * A reader that stops reading (a frozen collector) cannot make the queue grow without bound: past
 * `maxQueuedBytes` lines are dropped and counted, and the count is reported through `onDropped` once
 * the queue has drained. A sink that fails (its reader closed the pipe) is written no more: its
 * error is reported once through `onBroken`, and the process goes on serving without logs.
 */
export class TurnBatchedOutput implements DestinationStream {
  private pending = '';
  private scheduled = false;
  private dropped = 0;
  private broken = false;
  /** Told how many lines were dropped, once writing works again (set after the logger exists). */
  onDropped: ((lines: number) => void) | undefined;
  /** Told once that the sink failed; by default a line on standard error. */
  onBroken: (err: Error) => void = (err) => {
    process.stderr.write(`gateway: standard output failed (${(err as NodeJS.ErrnoException).code ?? err.message}); log lines are dropped from now on\n`);
  };

  constructor(
    private readonly sink: LineSink = process.stdout,
    private readonly maxQueuedBytes = 8 * 1024 * 1024,
  ) {
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
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushTurn);
    }
  }

  /** Writes what is pending now (pino's `logger.flush()`, and on process exit). */
  flush(cb?: (err?: Error) => void): void {
    this.flushTurn();
    cb?.();
  }

  private readonly flushTurn = (): void => {
    this.scheduled = false;
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
