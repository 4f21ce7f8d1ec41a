import { open, type FileHandle } from 'node:fs/promises';
import { FRAME_HEADER_BYTES, MAX_PAYLOAD_BYTES, readFrame } from './journal-frame';

const CHUNK_BYTES = 1 << 20;

export interface SegmentRecord {
  payload: Buffer;
  /** Offset just after this record: where reading resumes once it is committed. */
  end: number;
}

export interface SegmentChunk {
  records: SegmentRecord[];
  /** Runs of bytes skipped as no record (a torn last write, damage): each run cost at least one trace. */
  damagedRuns: number;
  damagedBytes: number;
  /** No record left after these. */
  done: boolean;
  /** Offset after the last record or skipped byte read. */
  offset: number;
}

/**
 * Reads a sealed segment (nothing appends to it any more) record by record from an offset, a chunk
 * at a time, so a segment never has to fit in memory. Bytes that are no record are skipped one at a
 * time until a frame checks out again (length, braces and CRC-32): a torn last record ends the
 * segment, a damaged one in the middle costs only itself.
 */
export class SegmentReader {
  private buf = Buffer.alloc(0);
  /** File offset of buf[0]; buf holds `filled` valid bytes. */
  private bufStart: number;
  private filled = 0;
  private pos: number;

  private constructor(
    private readonly fh: FileHandle,
    private readonly size: number,
    offset: number,
  ) {
    this.pos = Math.min(offset, size);
    this.bufStart = this.pos;
  }

  static async open(path: string, offset = 0): Promise<SegmentReader> {
    const fh = await open(path, 'r');
    try {
      return new SegmentReader(fh, (await fh.stat()).size, offset);
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  get offset(): number {
    return this.pos;
  }

  /** Up to `max` records from where the last call stopped. */
  async next(max: number): Promise<SegmentChunk> {
    const records: SegmentRecord[] = [];
    let damagedRuns = 0;
    let damagedBytes = 0;
    let skipping = false;
    while (records.length < max && this.pos < this.size) {
      const at = this.pos - this.bufStart;
      const r = readFrame(this.buf, at, this.filled);
      if (r.kind === 'record') {
        records.push({ payload: Buffer.from(r.payload), end: this.bufStart + r.next });
        this.pos = this.bufStart + r.next;
        skipping = false;
        continue;
      }
      if (r.kind === 'short' && this.bufStart + this.filled < this.size) {
        const len = this.filled - at >= FRAME_HEADER_BYTES ? this.buf.readUInt32LE(at) : 0;
        await this.fill(FRAME_HEADER_BYTES + Math.min(len, MAX_PAYLOAD_BYTES));
        continue;
      }
      // No record here (or one cut short by the end of the file): skip a byte and look again.
      if (!skipping) damagedRuns++;
      skipping = true;
      damagedBytes++;
      this.pos++;
    }
    return { records, damagedRuns, damagedBytes, done: this.pos >= this.size, offset: this.pos };
  }

  close(): Promise<void> {
    return this.fh.close();
  }

  /** Makes the buffer start at `pos` and hold at least `need` bytes from there (or up to the end of the file). */
  private async fill(need: number): Promise<void> {
    const keepFrom = this.pos - this.bufStart;
    const keep = Math.max(0, this.filled - keepFrom);
    const capacity = Math.max(CHUNK_BYTES, need);
    const next = this.buf.length >= capacity ? this.buf : Buffer.allocUnsafe(capacity);
    if (keep > 0) this.buf.copy(next, 0, keepFrom, this.filled);
    this.buf = next;
    this.bufStart = this.pos;
    this.filled = keep;
    while (this.filled < need && this.bufStart + this.filled < this.size) {
      const { bytesRead } = await this.fh.read(this.buf, this.filled, this.buf.length - this.filled, this.bufStart + this.filled);
      if (bytesRead === 0) break;
      this.filled += bytesRead;
    }
  }
}
