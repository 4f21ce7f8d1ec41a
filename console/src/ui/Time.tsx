import { DASH, fmtLocal, fmtLocalShort, fmtUtc } from '../format';

/** A time in the browser's zone, its UTC form on hover (title). */
export function Time({ iso, short }: { iso: string | null | undefined; short?: boolean }) {
  if (!iso) return <span class="muted">{DASH}</span>;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return <span>{iso}</span>;
  return (
    <time dateTime={d.toISOString()} title={fmtUtc(d)}>
      {short ? fmtLocalShort(d) : fmtLocal(d)}
    </time>
  );
}
