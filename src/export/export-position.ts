/**
 * Where an export stands (docs/operations.md "Decisions export", the cursor).
 *
 * Rows are read by the id of the transaction that wrote them (`txid`), the way the learning rollups
 * take them in: a read takes X = pg_snapshot_xmin(pg_current_snapshot()), below which every
 * transaction has ended, so every row with txid < X that will ever be visible is visible now,
 * whatever order concurrent writers committed in and however old its created_at (a trace replayed
 * from a replica's spool days later). A step exports the rows with txid in [lo, hi), hi being such an
 * X, in (created_at, id) order; rows stamped before txids existed (NULL) belong to the first step
 * (lo = 0). A position says what is exported:
 *
 *   every row with txid < lo, and the rows with txid in [lo, hi) up to (atUs, id) in (created_at, id) order.
 *
 * At a step's end it is the frontier (hi, hi, 0, 0): everything below hi, written `hi`; inside a step
 * (a file rotated half-way) `lo.hi.atUs.id`. A created_at of 0 µs and an id of 0 come before every
 * real row. Decimal digits and dots only, so it fits in a file name and a URL as it is.
 */
export interface ExportPosition {
  lo: bigint;
  hi: bigint;
  /** created_at of the last row taken of the step, µs since the epoch; 0: none yet. */
  atUs: bigint;
  id: bigint;
}

export const START: ExportPosition = Object.freeze({ lo: 0n, hi: 0n, atUs: 0n, id: 0n });

export function frontier(x: bigint): ExportPosition {
  return { lo: x, hi: x, atUs: 0n, id: 0n };
}

export const isFrontier = (p: ExportPosition): boolean => p.lo === p.hi && p.atUs === 0n && p.id === 0n;

export function formatPosition(p: ExportPosition): string {
  return isFrontier(p) ? String(p.hi) : `${p.lo}.${p.hi}.${p.atUs}.${p.id}`;
}

const DIGITS = /^\d{1,20}$/;
const INT8_MAX = 2n ** 63n - 1n;

/** The position a formatted one names; null when it is not one. */
export function parsePosition(text: string): ExportPosition | null {
  const parts = text.split('.');
  if ((parts.length !== 1 && parts.length !== 4) || !parts.every((s) => DIGITS.test(s))) return null;
  const n = parts.map((s) => BigInt(s));
  if (n.some((v) => v > INT8_MAX)) return null;
  const p = parts.length === 1 ? frontier(n[0]) : { lo: n[0], hi: n[1], atUs: n[2], id: n[3] };
  return p.lo <= p.hi ? p : null;
}

/**
 * Orders positions by what they cover: by lo, then within the step by (created_at, id). A frontier X
 * covers more than any position inside a step [lo, X) because lo < X.
 */
export function comparePositions(a: ExportPosition, b: ExportPosition): number {
  const keys: Array<[bigint, bigint]> = [
    [a.lo, b.lo],
    [a.atUs, b.atUs],
    [a.id, b.id],
  ];
  for (const [x, y] of keys) if (x !== y) return x < y ? -1 : 1;
  return 0;
}

export const maxPosition = (a: ExportPosition, b: ExportPosition): ExportPosition => (comparePositions(a, b) >= 0 ? a : b);

const PART = /^part-([0-9.]+)-([0-9.]+)\.(ndjson|csv|parquet)$/;

/** `part-<from>-<to>.<ext>`: what a complete file holds is (from, to]. */
export function partName(from: ExportPosition, to: ExportPosition, ext: string): string {
  return `part-${formatPosition(from)}-${formatPosition(to)}.${ext}`;
}

/** The positions a complete file's name carries; null for any other name. */
export function parsePartName(name: string): { from: ExportPosition; to: ExportPosition; ext: string } | null {
  const m = PART.exec(name);
  const from = m && parsePosition(m[1]);
  const to = m && parsePosition(m[2]);
  return from && to ? { from, to, ext: m[3] } : null;
}
