import { GatewayError } from '../../common/errors/gateway-error';

/** Page size of every Admin API list (docs/api.md "Admin API", pagination). */
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
/** The longest time range any Admin API query may span: a year, leap years included. */
export const MAX_RANGE_MS = 366 * 86_400_000;

/*
 * ISO 8601 with a zone (`Z` or ±hh:mm), seconds and fractions optional; or a bare date, read as UTC
 * midnight. A time without a zone is refused: it would mean the server's zone.
 */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;
const INTEGER = /^-?\d{1,16}$/;

const bad = (param: string, message: string): GatewayError => new GatewayError('invalid_request', message, { param });

/**
 * The query string of one Admin API route, checked before anything is read (docs/api.md "Admin
 * API", bad input): a parameter the route does not take, or one given twice, is 400
 * `invalid_request` naming it, and so is every value that fails its rule. Reads only the query's
 * own keys (the parser's object may hold any name, `__proto__` included).
 */
export class AdminQuery {
  private constructor(private readonly values: ReadonlyMap<string, string>) {}

  static parse(raw: unknown, allowed: readonly string[]): AdminQuery {
    const values = new Map<string, string>();
    if (raw !== null && typeof raw === 'object') {
      for (const name of Object.keys(raw)) {
        if (!allowed.includes(name)) throw bad(name, `Unknown query parameter "${name}".`);
        const v = (raw as Record<string, unknown>)[name];
        if (typeof v !== 'string') throw bad(name, `${name} must be given once, as a single value.`);
        values.set(name, v);
      }
    }
    return new AdminQuery(values);
  }

  has(name: string): boolean {
    return this.values.has(name);
  }

  /** A string of 1..`max` characters, matching `pattern` when given. */
  string(name: string, rule: { max?: number; pattern?: RegExp; what?: string } = {}): string | undefined {
    const v = this.values.get(name);
    if (v === undefined) return undefined;
    const max = rule.max ?? 256;
    if (v.length === 0 || v.length > max || (rule.pattern && !rule.pattern.test(v))) {
      throw bad(name, `${name} must be ${rule.what ?? `1 to ${max} characters`}.`);
    }
    return v;
  }

  int(name: string, min: number, max: number): number | undefined {
    const v = this.values.get(name);
    if (v === undefined) return undefined;
    const n = INTEGER.test(v) ? Number(v) : NaN;
    if (!(n >= min && n <= max)) throw bad(name, `${name} must be an integer from ${min} to ${max}.`);
    return n;
  }

  oneOf<T extends string>(name: string, values: readonly T[]): T | undefined {
    const v = this.values.get(name);
    if (v === undefined) return undefined;
    if (!(values as readonly string[]).includes(v)) throw bad(name, `${name} must be one of ${values.join(', ')}.`);
    return v as T;
  }

  bool(name: string): boolean | undefined {
    const v = this.oneOf(name, ['true', 'false'] as const);
    return v === undefined ? undefined : v === 'true';
  }

  /** An ISO 8601 time with a zone (or a bare date, UTC midnight) naming a real calendar day. */
  time(name: string): Date | undefined {
    const v = this.values.get(name);
    if (v === undefined) return undefined;
    const m = ISO_TIME.exec(v);
    const ms = m ? Date.parse(m[4] === undefined ? `${v}T00:00:00Z` : v) : NaN;
    // Date.parse rolls 2025-02-30 over into March: the calendar day must survive the round trip.
    const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))) : null;
    const real = day !== null && day.getUTCFullYear() === Number(m![1]) && day.getUTCMonth() === Number(m![2]) - 1 && day.getUTCDate() === Number(m![3]);
    if (!real || !Number.isFinite(ms) || Number(m![4] ?? 0) > 23 || Number(m![5] ?? 0) > 59 || Number(m![6] ?? 0) > 59) {
      throw bad(name, `${name} must be an ISO 8601 time with a zone, e.g. 2025-01-31T00:00:00Z.`);
    }
    return new Date(ms);
  }

  /** `limit` (1..1000, default 100) and the raw `cursor` (decoded by the route, which knows its keys). */
  page(): { limit: number; cursor: string | undefined } {
    return { limit: this.int('limit', 1, MAX_LIMIT) ?? DEFAULT_LIMIT, cursor: this.string('cursor', { max: 2048 }) };
  }

  /**
   * `from` and `to` (`from` < `to`, at most a year apart); `to` defaults to now and `from` to
   * `defaultSpanMs` before `to`. `asGiven` is what the caller sent (null where defaulted): what a
   * page cursor is tied to, so the next page of a "last 24 hours" list keeps going as now moves on.
   */
  range(now: Date, defaultSpanMs: number): { from: Date; to: Date; asGiven: [string | null, string | null] } {
    const givenTo = this.time('to');
    const givenFrom = this.time('from');
    const to = givenTo ?? now;
    const from = givenFrom ?? new Date(to.getTime() - defaultSpanMs);
    if (!(from.getTime() < to.getTime())) throw bad('from', 'from must be before to.');
    if (to.getTime() - from.getTime() > MAX_RANGE_MS) throw bad('from', 'The time range must be at most 366 days.');
    return { from, to, asGiven: [givenFrom?.toISOString() ?? null, givenTo?.toISOString() ?? null] };
  }
}
