/**
 * The `Retry-After` header of every answer that says "not now" (429 `rate_limited`,
 * `MONTHLY_LIMIT_EXCEEDED`, 503 `providers_unavailable`; docs/api.md "Errors"): the wait in whole
 * seconds, rounded up so a client that waits that long is never early, and at least 1.
 */
export function retryAfter(waitMs: number | undefined): { 'Retry-After': string } {
  return { 'Retry-After': String(Math.max(1, Math.ceil((waitMs ?? 0) / 1000))) };
}
