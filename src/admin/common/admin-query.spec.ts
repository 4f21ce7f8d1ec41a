import { GatewayError } from '../../common/errors/gateway-error';
import { AdminQuery, MAX_RANGE_MS } from './admin-query';
import { decodeCursor, encodeCursor, pageOf } from './cursor';

/** The 400 a call throws: its code and param. */
function refusal(fn: () => unknown): [string, string | undefined] {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatewayError) return [err.code, err.param];
    throw err;
  }
  throw new Error('no refusal');
}

describe('AdminQuery', () => {
  it('refuses unknown and repeated parameters by name, reading only own keys', () => {
    expect(refusal(() => AdminQuery.parse({ nope: '1' }, ['limit']))).toEqual(['invalid_request', 'nope']);
    expect(refusal(() => AdminQuery.parse({ limit: ['1', '2'] }, ['limit']))).toEqual(['invalid_request', 'limit']);
    const raw = Object.create(null) as Record<string, unknown>;
    raw['__proto__'] = '1';
    expect(refusal(() => AdminQuery.parse(raw, ['limit']))).toEqual(['invalid_request', '__proto__']);
    expect(AdminQuery.parse(undefined, []).has('limit')).toBe(false);
  });

  it('times: ISO 8601 with a zone or a bare date; real calendar days; no zone-less times', () => {
    const t = (v: string) => AdminQuery.parse({ from: v }, ['from']).time('from')!.toISOString();
    expect(t('2025-01-31T10:20:30Z')).toBe('2025-01-31T10:20:30.000Z');
    expect(t('2025-01-31T10:20:30.123456+02:00')).toBe('2025-01-31T08:20:30.123Z');
    expect(t('2025-01-31T10:20Z')).toBe('2025-01-31T10:20:00.000Z');
    expect(t('2024-02-29')).toBe('2024-02-29T00:00:00.000Z');
    for (const bad of ['2025-02-29', '2025-02-30T00:00:00Z', '2025-13-01', '2025-01-31T24:00:00Z', '2025-01-31T10:60:00Z', '2025-01-31T10:20:30', '1738000000', 'yesterday', '']) {
      expect([bad, ...refusal(() => t(bad))]).toEqual([bad, 'invalid_request', 'from']);
    }
  });

  it('ranges: defaults, order, the 366-day cap; what was given, for cursors', () => {
    const now = new Date('2025-06-01T00:00:00Z');
    const r = AdminQuery.parse({}, ['from', 'to']).range(now, 3_600_000);
    expect(r).toEqual({ from: new Date('2025-05-31T23:00:00Z'), to: now, asGiven: [null, null] });
    const full = AdminQuery.parse({ from: '2025-01-01', to: '2025-01-02' }, ['from', 'to']).range(now, 1);
    expect(full.asGiven).toEqual(['2025-01-01T00:00:00.000Z', '2025-01-02T00:00:00.000Z']);
    const from = '2024-01-01T00:00:00Z';
    expect(AdminQuery.parse({ from, to: new Date(Date.parse(from) + MAX_RANGE_MS).toISOString() }, ['from', 'to']).range(now, 1).from.toISOString()).toBe('2024-01-01T00:00:00.000Z');
    expect(refusal(() => AdminQuery.parse({ from, to: new Date(Date.parse(from) + MAX_RANGE_MS + 1).toISOString() }, ['from', 'to']).range(now, 1))).toEqual(['invalid_request', 'from']);
    expect(refusal(() => AdminQuery.parse({ from: '2025-01-02', to: '2025-01-01' }, ['from', 'to']).range(now, 1))).toEqual(['invalid_request', 'from']);
  });

  it('limit 1..1000, default 100; integers only', () => {
    expect(AdminQuery.parse({}, ['limit', 'cursor']).page()).toEqual({ limit: 100, cursor: undefined });
    expect(AdminQuery.parse({ limit: '1000' }, ['limit', 'cursor']).page().limit).toBe(1000);
    for (const bad of ['0', '1001', '-1', '1.0', '1e2', ' 5', 'x']) {
      expect([bad, ...refusal(() => AdminQuery.parse({ limit: bad }, ['limit', 'cursor']).page())]).toEqual([bad, 'invalid_request', 'limit']);
    }
  });
});

describe('cursors', () => {
  it('round-trip within their scope; another scope, other kinds or junk are 400 param cursor', () => {
    const c = encodeCursor(['keys', 'acme', null], ['2025-01-01T00:00:00.123456Z', 'key-1']);
    expect(decodeCursor(c, ['keys', 'acme', null], ['time', 'text'] as const)).toEqual(['2025-01-01T00:00:00.123456Z', 'key-1']);
    expect(decodeCursor(undefined, ['keys'], ['text'] as const)).toBeUndefined();
    for (const [text, scope, kinds] of [
      [c, ['keys', 'other', null], ['time', 'text']],
      [c, ['keys', 'acme', true], ['time', 'text']],
      [c, ['keys', 'acme', null], ['int', 'text']],
      [c, ['keys', 'acme', null], ['time']],
      ['not base64!', ['keys'], ['text']],
      [Buffer.from('[1,2]').toString('base64url'), ['keys'], ['text']],
    ] as const) {
      expect(refusal(() => decodeCursor(text, scope, kinds))).toEqual(['invalid_request', 'cursor']);
    }
  });

  it('pageOf: the first `limit` rows and a cursor after the last of them only when there were more', () => {
    const rows = [{ k: 'a' }, { k: 'b' }, { k: 'c' }];
    const more = pageOf(rows, 2, 's', (r) => [r.k], (r) => r.k);
    expect(more.data).toEqual(['a', 'b']);
    expect(decodeCursor(more.next_cursor!, 's', ['text'] as const)).toEqual(['b']);
    expect(pageOf(rows, 3, 's', (r) => [r.k], (r) => r.k)).toEqual({ data: ['a', 'b', 'c'], next_cursor: null });
  });
});
