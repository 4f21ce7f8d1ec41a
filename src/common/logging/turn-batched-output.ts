import type { DestinationStream } from 'pino';

/** What the lines are written to: standard output by default (a `Writable` is one). */
export interface LineSink {
  write(chunk: string): boolean;
  /** Bytes the sink has taken but not yet handed to the operating system. */
  readonly writableLength: number;
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
 * the queue has drained.
 */
export class TurnBatchedOutput implements DestinationStream {
  private pending = '';
  private scheduled = false;
  private dropped = 0;
  /** Told how many lines were dropped, once writing works again (set after the logger exists). */
  onDropped: ((lines: number) => void) | undefined;

  constructor(
    private readonly sink: LineSink = process.stdout,
    private readonly maxQueuedBytes = 8 * 1024 * 1024,
  ) {}

  write(line: string): void {
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
    if (out !== '') this.sink.write(out);
    if (this.dropped > 0 && this.sink.writableLength === 0) {
      const lines = this.dropped;
      this.dropped = 0;
      this.onDropped?.(lines);
    }
  };
}
