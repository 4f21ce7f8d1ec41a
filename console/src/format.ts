/** Numbers and times as the console shows them: the browser's locale and time zone; UTC on hover. */

const int = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const dec = (digits: number) => new Intl.NumberFormat(undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits });
const dec2 = dec(2);
const dec3 = dec(3);
const local = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
const localShort = new Intl.DateTimeFormat(undefined, { month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit' });

export const DASH = '—';

export function fmtInt(n: number | null | undefined): string {
  return n === null || n === undefined || !Number.isFinite(n) ? DASH : int.format(n);
}

/** A ratio in [0, 1] as a percentage with one decimal. */
export function fmtPct(r: number | null | undefined, digits = 1): string {
  return r === null || r === undefined || !Number.isFinite(r) ? DASH : `${(r * 100).toFixed(digits)}%`;
}

export function fmtNum(n: number | null | undefined, digits = 3): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return DASH;
  return digits === 2 ? dec2.format(n) : digits === 3 ? dec3.format(n) : dec(digits).format(n);
}

export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return DASH;
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${int.format(Math.round(ms))} ms`;
}

/** USD with enough digits for per-request costs (fractions of a cent). */
export function fmtUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return DASH;
  if (usd === 0) return '$0';
  const abs = Math.abs(usd);
  const digits = abs >= 100 ? 2 : abs >= 1 ? 3 : abs >= 0.01 ? 4 : 6;
  return `$${usd.toFixed(digits)}`;
}

export function fmtLocal(d: Date): string {
  return local.format(d);
}

export function fmtLocalShort(d: Date): string {
  return localShort.format(d);
}

export function fmtUtc(d: Date): string {
  return `${d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, '')} UTC`;
}

export const pairName = (p: { provider: string; model: string }): string => `${p.provider}/${p.model}`;
