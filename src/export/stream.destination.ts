import { open, readFile, rename } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { comparePositions, ExportPosition, formatPosition, parsePosition } from './export-position';
import type { ExportRow, KindSchema } from './export-schema';
import type { ExportDestination } from './export-destination';
import { StreamSink } from './formats/byte-sink';
import { createEncoder } from './formats/encoder-factory';
import type { EncoderOptions, ExportFormat, RecordEncoder } from './formats/record-encoder';

export interface StreamOptions {
  stream: Writable;
  schema: KindSchema;
  format: ExportFormat;
  /** Where the position is kept between runs (`--cursor-file`); none: every run starts from the beginning. */
  cursorFile?: string;
  encoder?: EncoderOptions;
}

/** The cursor file is rewritten at most this often while rows flow (and at every stop). */
const SAVE_MS = 1_000;

/**
 * Standard output (docs/operations.md "Decisions export", stdout): at least once. The position is
 * saved only after the rows before it were handed to the pipe, so a crash between the two sends them
 * again on the next run; each row's `id` (with its kind) lets a consumer drop the repeats.
 */
export class StreamDestination implements ExportDestination {
  private readonly sink: StreamSink;
  private readonly encoder: RecordEncoder;
  private saved: ExportPosition | null = null;
  private last: ExportPosition | null = null;
  private savedAt = 0;

  constructor(private readonly o: StreamOptions) {
    this.sink = new StreamSink(o.stream);
    this.encoder = createEncoder(o.format, o.schema, this.sink, o.encoder);
  }

  async start(): Promise<ExportPosition | null> {
    if (!this.o.cursorFile) return null;
    try {
      const saved = JSON.parse(await readFile(this.o.cursorFile, 'utf8')) as { position?: unknown; kind?: unknown };
      const at = typeof saved.position === 'string' ? parsePosition(saved.position) : null;
      if (!at || saved.kind !== this.o.schema.kind) throw new Error(`${this.o.cursorFile} is not a cursor of ${this.o.schema.kind}`);
      this.saved = at;
      return at;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async write(rows: readonly ExportRow[], _from: ExportPosition, to: ExportPosition): Promise<void> {
    await this.encoder.write(rows);
    this.last = to;
    if (Date.now() - this.savedAt >= SAVE_MS) await this.save();
  }

  async reached(at: ExportPosition): Promise<void> {
    this.last = at;
    if (Date.now() - this.savedAt >= SAVE_MS) await this.save();
  }

  async flush(): Promise<void> {
    await this.save();
  }

  async close(): Promise<void> {
    await this.encoder.end();
    await this.save();
  }

  private async save(): Promise<void> {
    this.savedAt = Date.now();
    const at = this.last;
    if (!this.o.cursorFile || !at || (this.saved && comparePositions(at, this.saved) <= 0)) return;
    // Only what the pipe has taken counts as sent.
    await this.sink.flushed();
    const tmp = `${this.o.cursorFile}.tmp`;
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(`${JSON.stringify({ kind: this.o.schema.kind, schema_version: this.o.schema.version, position: formatPosition(at) })}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, this.o.cursorFile);
    this.saved = at;
  }
}
