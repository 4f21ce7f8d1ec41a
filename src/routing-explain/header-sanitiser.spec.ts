import { sanitiseHeaders } from './header-sanitiser';

/** mulberry32: a small seeded generator, so a failing case can be replayed from its seed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EXACT = ['authorization', 'cookie', 'host'];
const PREFIXES = ['x-forwarded-', 'x-real-ip'];
const TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!#$%&'*+^`|~";
/** Keys that look reserved and are not: what a sloppy filter gets wrong in either direction. */
const NEAR_MISSES = [
  'authorizations', 'authorization-x', 'x-authorization', 'authorisation', 'auth', ' authorization', 'authorization ',
  'cookies', 'set-cookie', 'cookie2', 'x-cookie', 'hosts', 'x-host', 'host-name', 'hos', 'host ', '\thost',
  'x-forwarded', 'x_forwarded_for', 'xx-forwarded-for', 'forwarded', 'x-forward-for', ' x-forwarded-for', 'x-forwardedfor',
  'x-real-i', 'x-real_ip', 'x_real_ip', 'real-ip', 'xx-real-ip', ' x-real-ip', 'x-realip',
  'gateway-session-id', 'content-type', 'accept-language', 'x-team', 'user-agent', '',
];

type Kind = 'reserved' | 'allowed' | 'random';

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

/** Each ASCII letter upper- or lower-cased at random (tricky casing: `aUtHoRiZaTiOn`, `X-FORWARDED-For`). */
function scrambleCase(r: () => number, s: string): string {
  return Array.from(s, (c) => (r() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join('');
}

function randomToken(r: () => number, min = 0, max = 12): string {
  const n = min + Math.floor(r() * (max - min + 1));
  let out = '';
  for (let i = 0; i < n; i++) out += TOKEN_CHARS[Math.floor(r() * TOKEN_CHARS.length)];
  return out;
}

/** One key of a known kind: reserved by construction, allowed by construction, or random (classified by the rule itself). */
function randomKey(r: () => number): { key: string; kind: Kind } {
  const roll = r();
  if (roll < 0.35) {
    // Reserved: an exact name, or a prefix followed by anything (possibly nothing, for x-real-ip).
    if (r() < 0.5) return { key: scrambleCase(r, pick(r, EXACT)), kind: 'reserved' };
    const prefix = pick(r, PREFIXES);
    const suffix = r() < 0.2 ? '' : r() < 0.5 ? pick(r, ['for', 'host', 'proto', 'port', 'FOR', 'Client-IP']) : randomToken(r);
    return { key: scrambleCase(r, prefix) + suffix, kind: 'reserved' };
  }
  if (roll < 0.7) return { key: scrambleCase(r, pick(r, NEAR_MISSES)), kind: 'allowed' };
  if (roll < 0.8) {
    // Non-ASCII look-alikes: 'İ' lower-cases to "i̇", so "AUTHORİZATION" is not "authorization";
    // the Kelvin sign lower-cases to a plain "k", so "COO\u212AIE" *is* "cookie" once lower-cased.
    const [key, kind] = pick(r, [
      ['AUTHORİZATION', 'allowed'],
      ['HOSТ', 'allowed'], // Cyrillic Т
      ['ｈｏｓｔ', 'allowed'], // fullwidth
      ['x\u2010forwarded-for', 'allowed'], // Unicode hyphen
      ['COO\u212AIE', 'reserved'],
      ['cOo\u212Aie', 'reserved'],
    ] as const);
    return { key, kind };
  }
  return { key: randomToken(r, 0, 20), kind: 'random' };
}

/** The contract's rule, written independently of the implementation (regex with full Unicode case folding off). */
function reservedByContract(key: string): boolean {
  const l = key.toLowerCase();
  return /^(?:authorization|cookie|host)$/.test(l) || /^x-forwarded-/.test(l) || /^x-real-ip/.test(l);
}

describe('sanitiseHeaders (property test over random header maps)', () => {

  it('over 4,000 seeded maps: no reserved key survives and every other key does, unchanged', () => {
    const violations: string[] = [];
    let reservedSeen = 0;
    let allowedSeen = 0;
    for (let seed = 0; seed < 4_000; seed++) {
      const r = rng(seed);
      const map: Record<string, string> = {};
      const kinds = new Map<string, Kind>();
      const size = Math.floor(r() * 25);
      for (let i = 0; i < size; i++) {
        const { key, kind } = randomKey(r);
        map[key] = `v${seed}-${i}-${randomToken(r)}`;
        kinds.set(key, kind);
      }
      const input = JSON.stringify(map);
      const out = sanitiseHeaders(map);

      if (JSON.stringify(map) !== input) violations.push(`seed ${seed}: the input was modified`);
      for (const [key, kind] of kinds) {
        const reserved = kind === 'random' ? reservedByContract(key) : kind === 'reserved';
        // Oracle and generator agree about the constructed keys (guards the test itself).
        if (reservedByContract(key) !== reserved) violations.push(`seed ${seed}: generator/oracle disagree on ${JSON.stringify(key)}`);
        if (reserved) {
          reservedSeen++;
          if (Object.prototype.hasOwnProperty.call(out, key)) violations.push(`seed ${seed}: reserved ${JSON.stringify(key)} survived`);
        } else {
          allowedSeen++;
          if (out[key] !== map[key]) violations.push(`seed ${seed}: allowed ${JSON.stringify(key)} was dropped or changed`);
        }
      }
      for (const key of Object.keys(out)) {
        if (reservedByContract(key)) violations.push(`seed ${seed}: output holds reserved ${JSON.stringify(key)}`);
        if (!kinds.has(key)) violations.push(`seed ${seed}: output invented ${JSON.stringify(key)}`);
      }
    }
    expect(violations.slice(0, 20)).toEqual([]);
    // The generator really produced both kinds, in bulk.
    expect(reservedSeen).toBeGreaterThan(10_000);
    expect(allowedSeen).toBeGreaterThan(10_000);
  });

  it('drops each reserved form in any casing, and keeps the near misses', () => {
    const out = sanitiseHeaders({
      Authorization: 'Bearer secret',
      COOKIE: 'session=1',
      hOsT: 'evil.example',
      'X-Forwarded-For': '10.0.0.1',
      'x-forwarded-': 'empty suffix',
      'X-REAL-IP': '10.0.0.2',
      'x-real-ip-extra': 'still reserved',
      'x-forwarded': 'no trailing dash',
      'set-cookie': 'kept',
      'Gateway-Session-Id': 'sess-1',
    });
    expect(out).toEqual({ 'x-forwarded': 'no trailing dash', 'set-cookie': 'kept', 'Gateway-Session-Id': 'sess-1' });
  });

  it('keeps a __proto__ key as plain data (no prototype pollution)', () => {
    const input = JSON.parse('{"__proto__":"x","a":"b"}') as Record<string, string>;
    const out = sanitiseHeaders(input);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out).sort()).toEqual(['__proto__', 'a']);
  });
});
