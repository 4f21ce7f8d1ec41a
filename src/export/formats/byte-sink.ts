import { once } from 'node:events';
import type { FileHandle } from 'node:fs/promises';
import type { Writable } from 'node:stream';

/** Where an encoder's bytes go: a file being written, standard output, an HTTP response. */
export interface ByteSink {
  /** Resolves when the sink can take more (a stream's back-pressure is waited out here). */
  write(chunk: Uint8Array | string): Promise<void>;
}

/** A file, written in order through its handle (the caller syncs and closes it). */
export class FileSink implements ByteSink {
  bytes = 0;
  constructor(private readonly fh: FileHandle) {}

  async write(chunk: Uint8Array | string): Promise<void> {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let off = 0;
    while (off < buf.byteLength) off += (await this.fh.write(buf, off, buf.byteLength - off)).bytesWritten;
    this.bytes += buf.byteLength;
  }
}

/**
 * A stream (stdout, an HTTP response): a write that fills its buffer waits for `drain`, so a slow
 * reader slows the export down instead of growing memory. A stream that fails or closes under it
 * rejects the write.
 */
export class StreamSink implements ByteSink {
  bytes = 0;
  private failure: Error | null = null;

  constructor(private readonly stream: Writable) {
    stream.on('error', (err: Error) => (this.failure ??= err));
    stream.on('close', () => (this.failure ??= new Error('the output was closed')));
  }

  async write(chunk: Uint8Array | string): Promise<void> {
    if (this.failure) throw this.failure;
    this.bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.byteLength;
    if (this.stream.write(chunk)) return;
    const ac = new AbortController();
    const failed = new Promise<never>((_, reject) => {
      const f = () => reject(this.failure ?? new Error('the output was closed'));
      this.stream.once('close', f);
      this.stream.once('error', f);
      ac.signal.addEventListener('abort', () => {
        this.stream.off('close', f);
        this.stream.off('error', f);
      });
    });
    try {
      await Promise.race([once(this.stream, 'drain', { signal: ac.signal }), failed]);
    } finally {
      ac.abort();
    }
  }

  /** Resolves when everything written so far has been handed on (the stream's callback). */
  flushed(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.stream.write('', (err) => (err ? reject(err) : resolve())));
  }
}
