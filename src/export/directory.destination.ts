import { mkdir, open, readdir, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { comparePositions, ExportPosition, formatPosition, maxPosition, parsePartName, parsePosition, partName } from './export-position';
import type { ExportRow, KindSchema } from './export-schema';
import { FileSink } from './formats/byte-sink';
import { createEncoder } from './formats/encoder-factory';
import type { EncoderOptions, ExportFormat, RecordEncoder } from './formats/record-encoder';
import type { ExportDestination } from './export-destination';

export interface DirectoryOptions {
  /** The kind's own folder (`<out>/<kind>`). */
  dir: string;
  schema: KindSchema;
  format: ExportFormat;
  /** A file is completed once it holds this many bytes (checked after each batch or row group). */
  rotateBytes: number;
  /** … or once it has been open this long, whatever it holds. */
  rotateMs: number;
  /** false: a one-off dump (`--since`/`--until`): no cursor read or written. */
  cursor: boolean;
  encoder?: EncoderOptions;
  /** Told of every completed file. */
  onFile?(file: { name: string; rows: number; bytes: number }): void;
}

interface OpenFile {
  tmp: string;
  fh: FileHandle;
  sink: FileSink;
  encoder: RecordEncoder;
  from: ExportPosition;
  to: ExportPosition;
  openedAt: number;
}

const CURSOR = '.cursor';
const TMP = /^\.part-.*\.tmp$/;
/** A frontier with no file behind it is persisted at most this often: losing one only means reading an empty range again. */
const BARE_CURSOR_MS = 10_000;

/**
 * A directory destination of one kind (docs/operations.md "Decisions export", files and the cursor).
 *
 * Rows go to `.part-<from>.<ext>.tmp`, a name no reader of `part-*` picks up; when the file is
 * complete (size or age) it is synced, renamed to `part-<from>-<to>.<ext>` and the directory synced,
 * and only then is the cursor file `.cursor` replaced (written beside, synced, renamed). So a reader
 * never sees half a file, and every row is in exactly one complete file:
 *
 * - killed while a file is open: the temporary file is deleted at the next start, and its rows are
 *   read again from the cursor, which never moved past them;
 * - killed between the rename and the cursor's write: the next start takes the furthest of the cursor
 *   and the `<to>` of every complete file's name, so those rows are not exported a second time.
 */
export class DirectoryDestination implements ExportDestination {
  private committed: ExportPosition | null = null;
  private file: OpenFile | null = null;
  private bareCursorAt = 0;
  private lastReached: ExportPosition | null = null;
  /**
   * Where the last complete file ended (or the position found at start): the next file starts
   * there, so the names chain. A position that moved on past it without a file crossed only ranges
   * with no row of this kind.
   */
  private chainEnd: ExportPosition | null = null;

  constructor(private readonly o: DirectoryOptions) {}

  async start(): Promise<ExportPosition | null> {
    await mkdir(this.o.dir, { recursive: true });
    const names = await readdir(this.o.dir);
    for (const n of names.filter((x) => TMP.test(x))) await rm(join(this.o.dir, n), { force: true });
    if (!this.o.cursor) return null;
    let at: ExportPosition | null = null;
    try {
      const saved = JSON.parse(await readFile(join(this.o.dir, CURSOR), 'utf8')) as { position?: unknown };
      at = typeof saved.position === 'string' ? parsePosition(saved.position) : null;
      if (!at) throw new Error(`${join(this.o.dir, CURSOR)} holds no position`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    for (const n of names) {
      const part = parsePartName(n);
      if (part) at = at ? maxPosition(at, part.to) : part.to;
    }
    this.committed = at;
    this.chainEnd = at;
    if (at) await this.writeCursor(at);
    return at;
  }

  async write(rows: readonly ExportRow[], from: ExportPosition, to: ExportPosition): Promise<void> {
    if (rows.length === 0) return;
    const f = this.file ?? (await this.open(this.chainEnd ?? from));
    await f.encoder.write(rows);
    f.to = to;
    if (f.sink.bytes >= this.o.rotateBytes) await this.complete();
  }

  async reached(at: ExportPosition): Promise<void> {
    this.lastReached = at;
    if (this.file) {
      this.file.to = at;
      if (Date.now() - this.file.openedAt >= this.o.rotateMs) await this.complete();
      return;
    }
    if (!this.o.cursor || (this.committed && comparePositions(at, this.committed) <= 0)) return;
    if (Date.now() - this.bareCursorAt < BARE_CURSOR_MS && this.committed) return;
    await this.writeCursor(at);
    this.committed = at;
    this.bareCursorAt = Date.now();
  }

  /** Completes the open file, if any (before a pause for an outage, and at the end). */
  async flush(): Promise<void> {
    if (this.file) await this.complete();
  }

  async close(): Promise<void> {
    await this.flush();
    const at = this.lastReached;
    if (this.o.cursor && at && (!this.committed || comparePositions(at, this.committed) > 0)) {
      await this.writeCursor(at);
      this.committed = at;
    }
  }

  /** The position up to which rows are in complete files. */
  get position(): ExportPosition | null {
    return this.committed;
  }

  private async open(from: ExportPosition): Promise<OpenFile> {
    const tmp = join(this.o.dir, `.part-${formatPosition(from)}.${this.o.format}.tmp`);
    const fh = await open(tmp, 'w');
    const sink = new FileSink(fh);
    const encoder = createEncoder(this.o.format, this.o.schema, sink, this.o.encoder);
    this.file = { tmp, fh, sink, encoder, from, to: from, openedAt: Date.now() };
    return this.file;
  }

  private async complete(): Promise<void> {
    const f = this.file!;
    this.file = null;
    try {
      await f.encoder.end();
      await f.fh.sync();
    } finally {
      await f.fh.close();
    }
    const name = partName(f.from, f.to, this.o.format);
    await rename(f.tmp, join(this.o.dir, name));
    await syncDir(this.o.dir);
    if (this.o.cursor) await this.writeCursor(f.to);
    this.committed = f.to;
    this.chainEnd = f.to;
    this.o.onFile?.({ name, rows: f.encoder.rows, bytes: f.sink.bytes });
  }

  private async writeCursor(at: ExportPosition): Promise<void> {
    const tmp = join(this.o.dir, `${CURSOR}.tmp`);
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(`${JSON.stringify({ kind: this.o.schema.kind, schema_version: this.o.schema.version, position: formatPosition(at) })}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(this.o.dir, CURSOR));
    await syncDir(this.o.dir);
  }
}

/** Makes a rename in `dir` durable (a crash after it cannot bring the old name back). */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
