/**
 * UTC days and the names and bounds of `decision_traces`'s partitions (migration 0005): pure, so the
 * job, the CLI and their tests agree on them.
 */
export const DAY_MS = 86_400_000;
/** Day partitions exist from today to this many days ahead (UTC), so a missed run or two changes nothing. */
export const PARTITIONS_AHEAD = 7;
export const DEFAULT_PARTITION = 'decision_traces_default';

const DAY_PARTITION = /^decision_traces_p(\d{4})(\d{2})(\d{2})$/;

/** 00:00 UTC of the day `ms` falls in. */
export function utcDayStart(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

const isoDay = (dayMs: number): string => new Date(dayMs).toISOString().slice(0, 10);

/** `decision_traces_pYYYYMMDD` for the UTC day starting at `dayMs`. */
export function dayPartitionName(dayMs: number): string {
  return `decision_traces_p${isoDay(dayMs).replace(/-/g, '')}`;
}

/** The day a `decision_traces_pYYYYMMDD` name stands for (ms at 00:00 UTC), or null for any other name. */
export function dayOfPartition(name: string): number | null {
  const m = DAY_PARTITION.exec(name);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : null;
}

/** A partition bound as SQL text with an explicit offset, so no session time zone can move it: `timestamptz 'YYYY-MM-DD 00:00:00+00'`. */
export function midnightLiteral(dayMs: number): string {
  return `timestamptz '${isoDay(dayMs)} 00:00:00+00'`;
}

/** A partition's bounds: [from, to) in ms, null for MINVALUE / MAXVALUE; or the DEFAULT partition. */
export type PartitionBound = { kind: 'default' } | { kind: 'range'; from: number | null; to: number | null };

const RANGE = /^FOR VALUES FROM \((MINVALUE|'[^']*')\) TO \((MAXVALUE|'[^']*')\)$/;

function boundValue(text: string): number | null {
  if (text === 'MINVALUE' || text === 'MAXVALUE') return null;
  // '2026-11-27 00:00:00+00' (ISO output in UTC) → 2026-11-27T00:00:00+00:00
  const iso = text.slice(1, -1).replace(' ', 'T').replace(/([+-]\d{2})$/, '$1:00');
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`unreadable partition bound ${text}`);
  return ms;
}

/**
 * Reads `pg_get_expr(relpartbound, oid)` as printed with TimeZone UTC and DateStyle ISO (the
 * repository sets both); null for a bound of another shape (a list or hash partition).
 */
export function parsePartitionBound(expr: string): PartitionBound | null {
  if (expr === 'DEFAULT') return { kind: 'default' };
  const m = RANGE.exec(expr);
  return m ? { kind: 'range', from: boundValue(m[1]), to: boundValue(m[2]) } : null;
}

/** Whether a range [from, to) (null = unbounded) overlaps the UTC day starting at `dayMs`. */
export function overlapsDay(b: { from: number | null; to: number | null }, dayMs: number): boolean {
  return (b.from === null || b.from < dayMs + DAY_MS) && (b.to === null || b.to > dayMs);
}
