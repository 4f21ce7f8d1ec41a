/**
 * The parser of the pattern language (README "Configuration", `firewall.rules[]`): JavaScript
 * regular-expression syntax in `u` mode, less what a linear-time matcher cannot run
 * (backreferences, lookaround), counted repetition up to 1000, groups nested at most 50 deep and
 * no inline flags but a leading `(?i)`. It turns a pattern into a syntax tree whose characters are
 * already tests on code points, or throws FirewallPatternError naming the construct at fault.
 */

const MAX_REPEAT = 1000;
const MAX_DEPTH = 50;

export type CharTest = (cp: number) => boolean;

export type AssertKind = 'bol' | 'eol' | 'word' | 'nonword';

export type PatternNode =
  | { t: 'empty' }
  | { t: 'char'; test: CharTest }
  | { t: 'cat'; items: PatternNode[] }
  | { t: 'alt'; items: PatternNode[] }
  | { t: 'rep'; node: PatternNode; min: number; max: number }
  | { t: 'assert'; kind: AssertKind };

/** The pattern is outside the firewall's language, or invalid. The message names the construct, never text to match. */
export class FirewallPatternError extends Error {}

const isDigit = (cp: number) => cp >= 48 && cp <= 57;
/** JavaScript's `\w`; `\b` and `\B` test it on both sides of a position. */
export const isWordChar = (cp: number) => (cp >= 48 && cp <= 57) || (cp >= 65 && cp <= 90) || (cp >= 97 && cp <= 122) || cp === 95;
// JavaScript's \s: WhiteSpace and LineTerminator.
const SPACES = new Set([9, 10, 11, 12, 13, 32, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff]);
const isSpace = (cp: number) => SPACES.has(cp) || (cp >= 0x2000 && cp <= 0x200a);
const isLineTerminator = (cp: number) => cp === 10 || cp === 13 || cp === 0x2028 || cp === 0x2029;

function caseVariants(cp: number): number[] {
  if (cp < 128) {
    if (cp >= 65 && cp <= 90) return [cp, cp + 32];
    if (cp >= 97 && cp <= 122) return [cp, cp - 32];
    return [cp];
  }
  const s = String.fromCodePoint(cp);
  const out = new Set([cp]);
  for (const v of [s.toLowerCase(), s.toUpperCase()]) {
    const c = v.codePointAt(0)!;
    if (v.length === String.fromCodePoint(c).length) out.add(c);
  }
  return [...out];
}

/** Case-insensitive wrapper: the character or one of its simple case variants passes the test. */
function folded(test: CharTest): CharTest {
  return (cp) => {
    if (test(cp)) return true;
    if (cp < 128 && !((cp >= 65 && cp <= 90) || (cp >= 97 && cp <= 122))) return false;
    return caseVariants(cp).some((v) => v !== cp && test(v));
  };
}

const SYNTAX = new Set([...'^$\\.*+?()[]{}|/'].map((c) => c.codePointAt(0)!));

class Parser {
  private readonly cps: number[];
  private i = 0;
  private depth = 0;

  constructor(
    source: string,
    private readonly ignoreCase: boolean,
  ) {
    this.cps = Array.from(source, (c) => c.codePointAt(0)!);
  }

  parse(): PatternNode {
    const node = this.alternation();
    if (this.i < this.cps.length) throw this.error(this.cps[this.i] === 41 ? 'unmatched ")"' : `unexpected "${this.ch()}"`);
    return node;
  }

  private error(what: string): FirewallPatternError {
    return new FirewallPatternError(`${what} at position ${this.i}`);
  }

  private ch(): string {
    return String.fromCodePoint(this.cps[this.i]);
  }

  private peek(offset = 0): number | undefined {
    return this.cps[this.i + offset];
  }

  private alternation(): PatternNode {
    const items = [this.concatenation()];
    while (this.peek() === 124 /* | */) {
      this.i++;
      items.push(this.concatenation());
    }
    return items.length === 1 ? items[0] : { t: 'alt', items };
  }

  private concatenation(): PatternNode {
    const items: PatternNode[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === 124 || c === 41) break;
      const atom = this.atom();
      items.push(this.quantified(atom));
    }
    if (items.length === 0) return { t: 'empty' };
    return items.length === 1 ? items[0] : { t: 'cat', items };
  }

  private quantified(atom: PatternNode): PatternNode {
    const c = this.peek();
    let min: number;
    let max: number;
    if (c === 42 /* * */) [min, max] = [0, Infinity];
    else if (c === 43 /* + */) [min, max] = [1, Infinity];
    else if (c === 63 /* ? */) [min, max] = [0, 1];
    else if (c === 123 /* { */) {
      const bounds = this.braces();
      if (!bounds) throw this.error('a lone "{" (escape it as \\{)');
      [min, max] = bounds;
    } else return atom;
    if (atom.t === 'assert') throw this.error('a quantifier on an assertion');
    if (c !== 123) this.i++;
    if (this.peek() === 63) this.i++; // lazy: same language; matches are leftmost-longest anyway
    const q = this.peek();
    if (q === 42 || q === 43 || q === 63 || q === 123) throw this.error('a quantifier after a quantifier');
    return { t: 'rep', node: atom, min, max };
  }

  /** `{n}`, `{n,}`, `{n,m}` at the cursor; advances past it. Undefined when it is not one. */
  private braces(): [number, number] | undefined {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(String.fromCodePoint(...this.cps.slice(this.i, this.i + 24)));
    if (!m) return undefined;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
    if (min > MAX_REPEAT || (max !== Infinity && max > MAX_REPEAT)) throw this.error(`a repetition count above ${MAX_REPEAT}`);
    if (max < min) throw this.error('a repetition range out of order');
    this.i += m[0].length;
    return [min, max];
  }

  private atom(): PatternNode {
    const c = this.cps[this.i];
    switch (c) {
      case 40 /* ( */:
        return this.group();
      case 91 /* [ */:
        return this.charClass();
      case 46 /* . */:
        this.i++;
        return { t: 'char', test: (cp) => !isLineTerminator(cp) };
      case 94 /* ^ */:
        this.i++;
        return { t: 'assert', kind: 'bol' };
      case 36 /* $ */:
        this.i++;
        return { t: 'assert', kind: 'eol' };
      case 92 /* \ */:
        return this.atomEscape();
      case 42:
      case 43:
      case 63:
        throw this.error('a quantifier with nothing to repeat');
      case 123:
      case 125:
      case 93:
        throw this.error(`a lone "${this.ch()}" (escape it)`);
      default:
        this.i++;
        return this.literal(c);
    }
  }

  private literal(cp: number): PatternNode {
    if (!this.ignoreCase) return { t: 'char', test: (x) => x === cp };
    const variants = caseVariants(cp);
    return variants.length === 1 ? { t: 'char', test: (x) => x === cp } : { t: 'char', test: (x) => variants.includes(x) };
  }

  private group(): PatternNode {
    if (++this.depth > MAX_DEPTH) throw this.error(`groups nested deeper than ${MAX_DEPTH}`);
    this.i++;
    if (this.peek() === 63 /* ? */) {
      const next = this.peek(1);
      if (next === 58 /* : */) this.i += 2;
      else if (next === 60 /* < */ && this.peek(2) !== 61 && this.peek(2) !== 33) {
        // A named group: matched like any group (the firewall uses no captures).
        const rest = String.fromCodePoint(...this.cps.slice(this.i + 2, this.i + 2 + 130));
        const m = /^([A-Za-z_$][A-Za-z0-9_$]*)>/.exec(rest);
        if (!m) throw this.error('an invalid group name');
        this.i += 2 + m[0].length;
      } else if (next === 61 || next === 33 || next === 60) throw this.error('a lookaround assertion (not supported by the linear-time matcher)');
      else throw this.error('an inline flag group (only a leading (?i) is supported)');
    }
    const inner = this.alternation();
    if (this.peek() !== 41) throw this.error('an unclosed "("');
    this.i++;
    this.depth--;
    return inner;
  }

  /** An escape outside a class: a class escape, a character, or \b \B. */
  private atomEscape(): PatternNode {
    const c = this.peek(1);
    if (c === 98 /* b */ || c === 66 /* B */) {
      this.i += 2;
      return { t: 'assert', kind: c === 98 ? 'word' : 'nonword' };
    }
    const cls = this.classEscape();
    if (cls) return { t: 'char', test: cls };
    return this.literal(this.charEscape(false));
  }

  /** \d \D \w \W \s \S at the cursor (advances), else undefined. */
  private classEscape(): CharTest | undefined {
    const c = this.peek(1);
    let test: CharTest | undefined;
    if (c === 100) test = isDigit;
    else if (c === 68) test = (cp) => !isDigit(cp);
    else if (c === 119) test = isWordChar;
    else if (c === 87) test = (cp) => !isWordChar(cp);
    else if (c === 115) test = isSpace;
    else if (c === 83) test = (cp) => !isSpace(cp);
    if (test) this.i += 2;
    return test;
  }

  /** A character escape at the cursor (the backslash included); advances past it and returns the code point. */
  private charEscape(inClass: boolean): number {
    const c = this.peek(1);
    if (c === undefined) throw this.error('a trailing backslash');
    const simple: Record<number, number> = { 116: 9, 110: 10, 114: 13, 102: 12, 118: 11 };
    if (simple[c] !== undefined) {
      this.i += 2;
      return simple[c];
    }
    if (c === 48 /* 0 */ && !isDigit(this.peek(2) ?? -1)) {
      this.i += 2;
      return 0;
    }
    if (inClass && c === 98 /* \b in a class: backspace */) {
      this.i += 2;
      return 8;
    }
    if (c === 120 /* x */) return this.hexEscape(2, 2);
    if (c === 117 /* u */) {
      if (this.peek(2) === 123) {
        const m = /^\\u\{([0-9A-Fa-f]{1,6})\}/.exec(String.fromCodePoint(...this.cps.slice(this.i, this.i + 11)));
        const cp = m ? parseInt(m[1], 16) : NaN;
        if (!m || cp > 0x10ffff) throw this.error('an invalid \\u{...} escape');
        this.i += m[0].length;
        return cp;
      }
      return this.hexEscape(2, 4);
    }
    if (SYNTAX.has(c) || (inClass && c === 45 /* - */)) {
      this.i += 2;
      return c;
    }
    if (isDigit(c)) throw this.error('a backreference (not supported by the linear-time matcher)');
    if (c === 107 /* k */) throw this.error('a named backreference (not supported by the linear-time matcher)');
    if (c === 112 || c === 80) throw this.error('a Unicode property escape (not supported)');
    throw this.error(`an unknown escape "\\${String.fromCodePoint(c)}"`);
  }

  private hexEscape(skip: number, digits: number): number {
    const hex = String.fromCodePoint(...this.cps.slice(this.i + skip, this.i + skip + digits));
    if (!new RegExp(`^[0-9A-Fa-f]{${digits}}$`).test(hex)) throw this.error('an invalid hexadecimal escape');
    this.i += skip + digits;
    return parseInt(hex, 16);
  }

  private charClass(): PatternNode {
    this.i++;
    let negated = false;
    if (this.peek() === 94) {
      negated = true;
      this.i++;
    }
    const tests: CharTest[] = [];
    const ranges: Array<[number, number]> = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined) throw this.error('an unclosed "["');
      if (c === 93 /* ] */) {
        this.i++;
        break;
      }
      const lo = this.classAtom();
      if (typeof lo !== 'number') {
        tests.push(lo);
        if (this.peek() === 45 && this.peek(1) !== 93) throw this.error('a class escape in a range');
        continue;
      }
      if (this.peek() === 45 /* - */ && this.peek(1) !== 93 && this.peek(1) !== undefined) {
        this.i++;
        const hi = this.classAtom();
        if (typeof hi !== 'number') throw this.error('a class escape in a range');
        if (hi < lo) throw this.error('a character range out of order');
        ranges.push([lo, hi]);
      } else ranges.push([lo, lo]);
    }
    const inRanges = (cp: number) => ranges.some(([a, b]) => cp >= a && cp <= b) || tests.some((t) => t(cp));
    const member = this.ignoreCase ? folded(inRanges) : inRanges;
    return { t: 'char', test: negated ? (cp) => !member(cp) : member };
  }

  private classAtom(): number | CharTest {
    const c = this.cps[this.i];
    if (c === 92) return this.classEscape() ?? this.charEscape(true);
    if (c === 91) throw this.error('a nested "[" in a class (escape it)');
    this.i++;
    return c;
  }
}

/** Whether the tree matches the empty string (the language refuses such a pattern: it would match everywhere). */
function matchesEmpty(n: PatternNode): boolean {
  switch (n.t) {
    case 'empty':
    case 'assert':
      return true;
    case 'char':
      return false;
    case 'cat':
      return n.items.every(matchesEmpty);
    case 'alt':
      return n.items.some(matchesEmpty);
    case 'rep':
      return n.min === 0 || matchesEmpty(n.node);
  }
}

/** Parses a pattern of the language; a leading `(?i)` makes it case-insensitive. */
export function parsePattern(pattern: string): PatternNode {
  const ignoreCase = pattern.startsWith('(?i)');
  const root = new Parser(ignoreCase ? pattern.slice(4) : pattern, ignoreCase).parse();
  if (matchesEmpty(root)) throw new FirewallPatternError('the pattern matches the empty string');
  return root;
}
