/**
 * The one normalised upstream failure. `detail` is for logs only (it may
 * hold the provider's message); client-facing messages never copy upstream bodies.
 */
export type UpstreamErrorKind = 'timeout' | 'network' | 'status' | 'protocol' | 'aborted';

export class UpstreamError extends Error {
  constructor(
    readonly kind: UpstreamErrorKind,
    readonly detail: string,
    readonly opts: { status?: number; retryAfterMs?: number; code?: string; phase?: 'connect' | 'first_token' | 'idle' | 'total' } = {},
  ) {
    super(`${kind}${opts.status ? ` ${opts.status}` : ''}: ${detail}`);
    this.name = 'UpstreamError';
  }

  get status(): number | undefined {
    return this.opts.status;
  }

  get retryAfterMs(): number | undefined {
    return this.opts.retryAfterMs;
  }
}

/** Parses `retry-after-ms` (ms) or `retry-after` (seconds or an HTTP date) into milliseconds. */
export function parseRetryAfter(headers: Record<string, string | string[] | undefined>, now = Date.now()): number | undefined {
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const ms = Number(one(headers['retry-after-ms']));
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = one(headers['retry-after']);
  if (raw === undefined) return undefined;
  const secs = Number(raw);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const date = Date.parse(raw);
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined;
}
