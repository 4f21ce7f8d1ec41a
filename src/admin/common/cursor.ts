import { createHash } from 'node:crypto';
import { GatewayError } from '../../common/errors/gateway-error';

/**
 * Opaque page cursors of the Admin API (docs/api.md "Admin API", pagination): base64url JSON of the
 * last row's sort keys and a fingerprint of the list and its filters. A cursor given to another
 * list, or with other filters, is 400 `invalid_request` (param `cursor`) rather than a silently
 * wrong page. It is not signed: every query is scoped to the caller's organisation, so an edited
 * cursor can only move within what the caller may read anyway.
 */

/** The kinds of sort key a cursor carries: a microsecond UTC time from SQL, a text id, a decimal integer id. */
export type CursorKey = 'time' | 'text' | 'int';

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const DECIMAL = /^\d{1,19}$/;

const fingerprint = (scope: unknown): string => createHash('sha256').update(JSON.stringify(scope)).digest('base64url').slice(0, 16);

const invalid = (): GatewayError => new GatewayError('invalid_request', 'cursor is not a cursor of this list with these filters.', { param: 'cursor' });

export function encodeCursor(scope: unknown, keys: readonly string[]): string {
  return Buffer.from(JSON.stringify({ s: fingerprint(scope), k: keys })).toString('base64url');
}

/** The keys of a cursor made by `encodeCursor` for the same scope, checked against `kinds`; undefined for no cursor. */
export function decodeCursor<const K extends readonly CursorKey[]>(text: string | undefined, scope: unknown, kinds: K): { [I in keyof K]: string } | undefined {
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(text)) throw invalid();
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  const p = parsed as { s?: unknown; k?: unknown } | null;
  if (p === null || typeof p !== 'object' || p.s !== fingerprint(scope) || !Array.isArray(p.k) || p.k.length !== kinds.length) throw invalid();
  const keys = p.k as unknown[];
  kinds.forEach((kind, i) => {
    const v = keys[i];
    const ok = typeof v === 'string' && (kind === 'time' ? MICRO_TIME.test(v) : kind === 'int' ? DECIMAL.test(v) : v.length <= 256);
    if (!ok) throw invalid();
  });
  return keys as { [I in keyof K]: string };
}

/**
 * A page from rows read with `limit + 1`: the first `limit` rows and, when there were more, the
 * cursor after the last of them; null at the end.
 */
export function pageOf<R, J>(rows: readonly R[], limit: number, scope: unknown, keysOf: (row: R) => readonly string[], toJson: (row: R) => J): { data: J[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const more = rows.length > limit && page.length > 0;
  return { data: page.map(toJson), next_cursor: more ? encodeCursor(scope, keysOf(page[page.length - 1])) : null };
}
