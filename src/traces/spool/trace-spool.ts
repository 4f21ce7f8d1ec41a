import { mkdirSync, readdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { open, rename, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { stripUndefined } from '../../common/options';
import { PgliteDirLock, type LockSubject } from '../../stores/sql/pglite-dir-lock';
import type { DecisionTrace } from '../decision-trace';
import { encodeFrames } from './journal-frame';
import { SegmentReader } from './segment-reader';
import { decodeTrace, encodeTrace } from './trace-codec';

/*
 * The durable trace spool (docs/operations.md "Store outages"): an append-only journal of decision
 * traces in the data directory, written while the analytics store is down or slow and replayed into
 * it when it answers again.
 *
 * Layout of `<GATEWAY_DATA_DIR>/trace-spool/`:
 *   gateway.lock                 the directory's lock (one process per spool, as for PGlite's folder)
 *   0000000000000042.seg         segments, numbered in the order they were written; appends go to the
 *                                newest only, which is rotated at `segmentBytes`; a segment left by an
 *                                earlier process is never appended to again (its tail may be torn)
 *   replay.cursor                {"segment":42,"offset":81920}: how far replay got (rewritten after each
 *                                committed batch, not synced: losing it only replays a batch again,
 *                                which the store's idempotent insert ignores)
 *
 * Durability: a batch is handed to the kernel with one write(2) before `append` resolves, and the
 * segment is fdatasync'ed every `fsyncIntervalMs` (and when it is sealed or the spool closes). A
 * crash of the process loses nothing that `append` accepted; a crash of the machine (power, kernel)
 * loses at most the last interval's appends, whose torn last record is detected and skipped.
 */

export const SPOOL_DIR_NAME = 'trace-spool';
const SEGMENT = /^(\d{16})\.seg$/;
const CURSOR_FILE = 'replay.cursor';

const SPOOL_LOCK: LockSubject = {
  what: 'the decision-trace spool',
  rule: 'two processes must never append to one trace spool (give each replica its own GATEWAY_DATA_DIR)',
};

export class TraceSpoolOptions {
  /** The spool folder. */
  dir!: string;
  /** Bytes on disk at most (segments); an append that would pass it is refused. */
  maxBytes!: number;
  /** A segment is sealed and a new one started once it holds this much. */
  segmentBytes?: number;
  /** How often appended data is fdatasync'ed. */
  fsyncIntervalMs?: number;
  /** Appends handed over but not yet written, at most: a disk that cannot keep up refuses more. */
  maxPendingBytes?: number;
  /** After a failed write, appends are refused this long. */
  writeErrorBackoffMs?: number;
}

const DEFAULTS = { segmentBytes: 16 << 20, fsyncIntervalMs: 1_000, maxPendingBytes: 16 << 20, writeErrorBackoffMs: 30_000 };

interface Segment {
  seq: number;
  path: string;
  bytes: number;
}

interface Cursor {
  segment: number;
  offset: number;
}

/** One batch read for replay: written to the store, then committed (which may delete its segment). */
export interface SpoolBatch {
  traces: DecisionTrace[];
  /** Records skipped as unreadable (a torn last write, damage) on the way to these. */
  damaged: number;
  commit(): Promise<void>;
}

const segName = (seq: number) => `${String(seq).padStart(16, '0')}.seg`;

/**
 * The journal itself: appends, the replay cursor, segments and the folder lock. Single writer and
 * single reader (the decision-trace writer does both); every file operation runs in order on one
 * chain, so a seal never races an append.
 */
export class TraceSpool {
  private readonly o: typeof DEFAULTS & { dir: string; maxBytes: number };
  /** Sealed segments, oldest first; the active one (appended to) is separate. */
  private readonly sealed: Segment[] = [];
  private active: (Segment & { fh: FileHandle; dirty: boolean }) | undefined;
  private nextSeq: number;
  private cursor: Cursor | undefined;
  private reader: { seg: Segment; r: SegmentReader } | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private pendingBytes = 0;
  private refuseUntil = 0;
  private closed = false;
  private readonly syncTimer: NodeJS.Timeout;
  /** The last write error, for the caller's log. */
  lastError: unknown;

  private constructor(
    options: TraceSpoolOptions,
    private readonly lock: PgliteDirLock | undefined,
  ) {
    this.o = { ...DEFAULTS, ...stripUndefined(options) } as typeof this.o;
    const found: Segment[] = [];
    for (const name of readdirSync(this.o.dir)) {
      const m = SEGMENT.exec(name);
      if (!m) continue;
      const path = join(this.o.dir, name);
      found.push({ seq: Number(m[1]), path, bytes: statSync(path).size });
    }
    found.sort((a, b) => a.seq - b.seq);
    this.cursor = readCursor(join(this.o.dir, CURSOR_FILE));
    // Segments before the cursor's were replayed whole; a crash came between the cursor and the unlink.
    for (const s of found) {
      if (this.cursor && s.seq < this.cursor.segment) unlinkQuiet(s.path);
      else this.sealed.push(s);
    }
    this.nextSeq = Math.max(0, ...found.map((s) => s.seq), this.cursor?.segment ?? 0) + 1;
    // Off the append chain: fdatasync may take tens of milliseconds, and appends must not queue behind it.
    this.syncTimer = setInterval(() => void this.syncActive().catch(() => undefined), this.o.fsyncIntervalMs);
    this.syncTimer.unref();
  }

  /**
   * Opens (creating) the spool folder holding its lock. Rejects with PgliteDirLockedError when another
   * live process holds it.
   */
  static async open(options: TraceSpoolOptions): Promise<TraceSpool> {
    mkdirSync(options.dir, { recursive: true });
    return PgliteDirLock.openWith(options.dir, async (lock) => new TraceSpool(options, lock), SPOOL_LOCK);
  }

  /** Bytes of every segment on disk, what is being written included. */
  get bytes(): number {
    let n = this.active?.bytes ?? 0;
    for (const s of this.sealed) n += s.bytes;
    return n + this.pendingBytes;
  }

  /** True while anything waits to be replayed. */
  get hasBacklog(): boolean {
    return this.sealed.length > 0 || (this.active?.bytes ?? 0) > 0 || this.pendingBytes > 0;
  }

  get dir(): string {
    return this.o.dir;
  }

  /**
   * Appends the traces in order as one write. Resolves true once the kernel has them; false (nothing
   * written, the caller keeps them) when the spool is closed, full, behind on writes, or its last write
   * failed less than `writeErrorBackoffMs` ago. Never rejects.
   */
  async append(traces: readonly DecisionTrace[]): Promise<boolean> {
    if (traces.length === 0) return true;
    if (this.closed || Date.now() < this.refuseUntil) return false;
    let frames: Buffer;
    try {
      frames = encodeFrames(traces.map(encodeTrace));
    } catch (err) {
      this.lastError = err;
      return false;
    }
    if (this.bytes + frames.length > this.o.maxBytes || this.pendingBytes + frames.length > this.o.maxPendingBytes) return false;
    this.pendingBytes += frames.length;
    const pending = { bytes: frames.length };
    try {
      await this.serial(() => this.write(frames, pending));
      return true;
    } catch (err) {
      this.lastError = err;
      this.refuseUntil = Date.now() + this.o.writeErrorBackoffMs;
      // What a failed write left in the segment is a torn record to its reader; nothing more goes there.
      await this.serial(() => this.sealActive()).catch(() => undefined);
      return false;
    } finally {
      this.pendingBytes -= pending.bytes;
    }
  }

  /**
   * The next batch to replay, oldest first, or undefined when there is none. The active segment is
   * sealed when nothing older is left, so replay only ever reads files nothing writes to. Call
   * `commit` once the batch is in the store, before reading the next.
   */
  async next(max: number): Promise<SpoolBatch | undefined> {
    let damaged = 0;
    for (;;) {
      if (!this.reader) {
        if (this.sealed.length === 0) await this.serial(() => this.sealActive());
        const seg = this.sealed[0];
        if (!seg) return damaged > 0 ? { traces: [], damaged, commit: async () => undefined } : undefined;
        const from = this.cursor?.segment === seg.seq ? this.cursor.offset : 0;
        this.reader = { seg, r: await SegmentReader.open(seg.path, from) };
      }
      const { seg, r } = this.reader;
      const chunk = await r.next(max);
      damaged += chunk.damagedRuns;
      const traces: DecisionTrace[] = [];
      for (const rec of chunk.records) {
        try {
          traces.push(decodeTrace(rec.payload));
        } catch {
          damaged++;
        }
      }
      const commit = async () => {
        this.cursor = { segment: seg.seq, offset: chunk.offset };
        if (chunk.done) {
          this.reader = undefined;
          await r.close().catch(() => undefined);
          this.sealed.shift();
          await unlink(seg.path).catch(() => undefined);
          this.cursor = { segment: seg.seq + 1, offset: 0 };
        }
        await writeCursor(join(this.o.dir, CURSOR_FILE), this.cursor);
      };
      if (traces.length > 0) return { traces, damaged, commit };
      // Nothing readable left in this segment: done with it.
      await commit();
    }
  }

  /** Forgets how far the last batch read got: the next `next` reads again from the last commit (its write failed). */
  async rewind(): Promise<void> {
    const r = this.reader;
    this.reader = undefined;
    await r?.r.close().catch(() => undefined);
  }

  /** Stops taking appends, syncs and closes the files, and releases the folder. What is on disk stays for the next start. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.syncTimer);
    try {
      await this.serial(async () => {
        await this.syncActive();
        await this.active?.fh.close();
        if (this.active && this.active.bytes === 0) await unlink(this.active.path).catch(() => undefined);
        this.active = undefined;
      });
    } finally {
      await this.reader?.r.close().catch(() => undefined);
      this.reader = undefined;
      this.lock?.release();
    }
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Writes `frames` to the active segment; `pending.bytes` moves from pending to the segment once written. */
  private async write(frames: Buffer, pending: { bytes: number }): Promise<void> {
    if (this.active && this.active.bytes >= this.o.segmentBytes) await this.sealActive();
    if (!this.active) {
      const seq = this.nextSeq++;
      const path = join(this.o.dir, segName(seq));
      const fh = await open(path, 'wx');
      this.active = { seq, path, bytes: 0, fh, dirty: false };
      // The new file's name must outlive a power cut as well as its content.
      await syncDir(this.o.dir);
    }
    const a = this.active;
    let done = 0;
    while (done < frames.length) {
      const { bytesWritten } = await a.fh.write(frames, done, frames.length - done, a.bytes + done);
      done += bytesWritten;
    }
    a.bytes += frames.length;
    this.pendingBytes -= pending.bytes;
    pending.bytes = 0;
    a.dirty = true;
  }

  private syncing = false;

  private async syncActive(): Promise<void> {
    const a = this.active;
    if (!a?.dirty || this.syncing) return;
    this.syncing = true;
    a.dirty = false;
    try {
      await a.fh.datasync();
    } catch (err) {
      a.dirty = true;
      throw err;
    } finally {
      this.syncing = false;
    }
  }

  /** The active segment becomes the newest sealed one (synced and closed); the next append starts another. */
  private async sealActive(): Promise<void> {
    const a = this.active;
    if (!a) return;
    this.active = undefined;
    // Counted among the sealed at once: the cap must see its bytes while it is being synced.
    if (a.bytes > 0) this.sealed.push({ seq: a.seq, path: a.path, bytes: a.bytes });
    try {
      if (a.dirty) await a.fh.datasync();
    } finally {
      await a.fh.close().catch(() => undefined);
    }
    if (a.bytes === 0) await unlink(a.path).catch(() => undefined);
  }
}

function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function readCursor(path: string): Cursor | undefined {
  try {
    const c = JSON.parse(readFileSync(path, 'utf8')) as Cursor;
    return Number.isSafeInteger(c.segment) && Number.isSafeInteger(c.offset) && c.offset >= 0 ? c : undefined;
  } catch {
    return undefined;
  }
}

async function writeCursor(path: string, c: Cursor): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, JSON.stringify(c));
  await rename(tmp, path);
}

async function syncDir(dir: string): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(dir, 'r');
    await fh.sync();
  } catch {
    // Not every file system lets a directory be synced; the segment's own data is synced regardless.
  } finally {
    await fh?.close().catch(() => undefined);
  }
}
