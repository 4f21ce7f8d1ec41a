import { crc32 } from 'node:zlib';

/*
 * One record of the trace spool on disk (docs/operations.md "Store outages"):
 *
 *   u32 LE  payload length in bytes
 *   u32 LE  CRC-32 of the payload
 *   payload (UTF-8 JSON of one decision trace)
 *
 * A record is only believed when its whole payload is there and its checksum matches: the last record
 * a crash cut short (a torn write) fails one or the other and is skipped, and so is a record damaged
 * in the middle of a segment, after which reading resumes at the next frame that checks out.
 */

export const FRAME_HEADER_BYTES = 8;
/** No trace comes near this (about 1 KiB each); a length beyond it is damage, not a record. */
export const MAX_PAYLOAD_BYTES = 1 << 20;

/** Frames `payloads` into one buffer, written with one call so a batch is one append. */
export function encodeFrames(payloads: readonly Buffer[]): Buffer {
  let size = 0;
  for (const p of payloads) size += FRAME_HEADER_BYTES + p.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const p of payloads) {
    out.writeUInt32LE(p.length, at);
    out.writeUInt32LE(crc32(p), at + 4);
    p.copy(out, at + FRAME_HEADER_BYTES);
    at += FRAME_HEADER_BYTES + p.length;
  }
  return out;
}

export type FrameRead =
  /** A whole record that checks out; the next one starts at `next`. */
  | { kind: 'record'; payload: Buffer; next: number }
  /** Fewer bytes than the frame announces: more may be read, or (at the end of a segment) the write was torn. */
  | { kind: 'short' }
  /** The bytes at this offset are no record (bad length or checksum). */
  | { kind: 'bad' };

/** Reads the frame starting at `at` of `buf` (whose first `end` bytes are valid). */
export function readFrame(buf: Buffer, at: number, end: number): FrameRead {
  if (end - at < FRAME_HEADER_BYTES) return { kind: 'short' };
  const len = buf.readUInt32LE(at);
  if (len === 0 || len > MAX_PAYLOAD_BYTES) return { kind: 'bad' };
  if (end - at < FRAME_HEADER_BYTES + len) return { kind: 'short' };
  const start = at + FRAME_HEADER_BYTES;
  // A JSON object, cheap to check before the checksum: most damaged offsets fail here.
  if (buf[start] !== 0x7b /* { */ || buf[start + len - 1] !== 0x7d /* } */) return { kind: 'bad' };
  const payload = buf.subarray(start, start + len);
  if (crc32(payload) !== buf.readUInt32LE(at + 4)) return { kind: 'bad' };
  return { kind: 'record', payload, next: start + len };
}
