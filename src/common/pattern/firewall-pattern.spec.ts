import { FirewallPattern, firewallPatternProblem, MAX_STATES } from './firewall-pattern';
import { mulberry32 } from '../../routing/strategies/random';

/** Native RegExp for the same pattern (u flag; i when the pattern starts with (?i)). */
function native(pattern: string, global = false): RegExp {
  const i = pattern.startsWith('(?i)');
  return new RegExp(i ? pattern.slice(4) : pattern, `u${i ? 'i' : ''}${global ? 'g' : ''}`);
}

describe('FirewallPattern (linear-time matcher)', () => {
  // Leftmost starts agree with JavaScript's backtracking engine whatever the semantics of the end;
  // `test` must agree exactly.
  const PATTERNS = [
    'ab', 'a|b', 'ab|ba', 'a+b', 'a*b', '(ab)+', '(?:a|b)*c', '[ab]{2,3}', 'a{2}', 'a{1,}b', 'a.c', '[^a]b', '^a', 'b$', '\\bab\\b',
    '\\Bb', '(a|ab)(c|bcd)', '(?i)AB', '(?i)[a-b]c', 'c?a+', '(?<x>a)b', 'a\\.b', '\\d+', '\\w\\s', '[\\d\\s]a', '(a+)+b', '(a|a)*c',
  ];

  it.each(PATTERNS)('agrees with RegExp on %s over random texts', (pattern) => {
    const fp = FirewallPattern.compile(pattern);
    const rnd = mulberry32(42);
    const alphabet = ['a', 'b', 'c', 'A', 'B', ' ', '1', '.', 'd'];
    for (let n = 0; n < 400; n++) {
      const len = Math.floor(rnd() * 12);
      let text = '';
      for (let i = 0; i < len; i++) text += alphabet[Math.floor(rnd() * alphabet.length)];
      expect([text, fp.test(text)]).toEqual([text, native(pattern).test(text)]);
      const first = fp.findAll(text)[0];
      const m = native(pattern).exec(text);
      expect([text, first?.[0]]).toEqual([text, m?.index]);
    }
  });

  it('finds leftmost-longest, non-overlapping spans in UTF-16 offsets', () => {
    expect(FirewallPattern.compile('a|ab').findAll('xabab')).toEqual([[1, 3], [3, 5]]);
    expect(FirewallPattern.compile('\\d{3}-\\d{4}').findAll('call 555-1234 or 555-9876')).toEqual([[5, 13], [17, 25]]);
    // An astral character is one character for `.` and offsets count its two code units.
    expect(FirewallPattern.compile('x.y').findAll('😀x😀y')).toEqual([[2, 6]]);
  });

  it('is case-insensitive with a leading (?i), as in the documented example', () => {
    const fp = FirewallPattern.compile('(?i)api[_-]?key\\s*[:=]');
    expect(fp.test('my API_KEY = x')).toBe(true);
    expect(fp.test('my Api-Key: x')).toBe(true);
    expect(fp.test('apikey=x')).toBe(true);
    expect(fp.test('api key = x')).toBe(false);
  });

  it('runs patterns that backtrack catastrophically in JavaScript in linear time', () => {
    // (a+)+$ / (a|a)*b take exponential time on a backtracking engine for a string of a's that
    // fails at the end; here the work per character is bounded by the pattern's states.
    for (const pattern of ['(a+)+$', '(a|a)*b', '(a|aa)+c', '(\\w+\\s?)+!']) {
      const fp = FirewallPattern.compile(pattern);
      const evil = `${'a'.repeat(50_000)}X`;
      expect(fp.test(evil)).toBe(false);
      expect(fp.findAll(evil)).toEqual([]);
    }
  });

  it.each([
    ['(a)\\1', /backreference/],
    ['(?<n>a)\\k<n>', /named backreference/],
    ['(?=a)b', /lookaround/],
    ['(?!a)b', /lookaround/],
    ['(?<=a)b', /lookaround/],
    ['(?<!a)b', /lookaround/],
    ['a(?i)b', /inline flag/],
    ['(?s)a', /inline flag/],
    ['a**', /quantifier after a quantifier/],
    ['*a', /nothing to repeat/],
    ['a{', /lone "\{"/],
    ['a}', /lone "\}"/],
    ['a]', /lone "\]"/],
    ['(a', /unclosed "\("/],
    ['a)', /unmatched "\)"/],
    ['[a', /unclosed "\["/],
    ['[b-a]', /out of order/],
    ['a{3,2}', /out of order/],
    ['a{1001}', /above 1000/],
    ['\\p{L}', /property escape/],
    ['\\q', /unknown escape/],
    ['a*', /matches the empty string/],
    ['^', /matches the empty string/],
    ['(a|)', /matches the empty string/],
    [`${'('.repeat(60)}a${')'.repeat(60)}`, /nested deeper than 50/],
    ['(a{1000}){10}', new RegExp(`more than ${MAX_STATES} states`)],
  ])('refuses %s', (pattern, why) => {
    expect(firewallPatternProblem(pattern)).toMatch(why);
    expect(firewallPatternProblem(pattern)).toMatch(/^invalid regular expression for the firewall's linear-time matcher: /);
  });

  it('accepts the usual constructs', () => {
    for (const p of ['(?i)password\\s*[:=]\\s*\\S+', '\\b\\d{4}[ -]?\\d{4}[ -]?\\d{4}[ -]?\\d{4}\\b', '[\\w.+-]+@[\\w-]+\\.[\\w.]+', 'sk-[A-Za-z0-9]{20,}', '\\u{1F600}|\\x41\\u0042']) {
      expect(firewallPatternProblem(p)).toBeUndefined();
    }
  });
});
