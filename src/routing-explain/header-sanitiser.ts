/**
 * Contract "POST /v1/routing/explain", header sanitisation: before the `headers` map reaches the
 * dry-run engine, every entry whose lower-cased key equals `authorization`, `cookie` or `host`, or
 * starts with `x-forwarded-` or `x-real-ip`, is dropped. Every other entry is kept as given.
 */
const DROPPED_KEYS: ReadonlySet<string> = new Set(['authorization', 'cookie', 'host']);
const DROPPED_PREFIXES: readonly string[] = ['x-forwarded-', 'x-real-ip'];

/** Whether the contract reserves this header key (case-insensitive, by `String#toLowerCase`, which is locale-independent). */
export function isReservedHeader(key: string): boolean {
  const lower = key.toLowerCase();
  return DROPPED_KEYS.has(lower) || DROPPED_PREFIXES.some((p) => lower.startsWith(p));
}

/** A new map without the reserved entries; the input is not modified. */
export function sanitiseHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  // fromEntries defines own properties, so even a key such as `__proto__` stays plain data.
  return Object.fromEntries(Object.entries(headers).filter(([key]) => !isReservedHeader(key)));
}
