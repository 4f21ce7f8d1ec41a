/**
 * The firewall's own regular-expression engine (docs/architecture.md "The firewall's linear-time
 * matcher": no rule may backtrack catastrophically). Rather than guess which backtracking patterns are
 * safe, firewall patterns run on a linear-time matcher: the pattern is compiled to a Thompson NFA and
 * simulated over the text with one set of states per position (no backtracking), so matching costs
 * O(text length × pattern states) whatever the pattern. The price is a restricted language (README
 * "Configuration", `firewall.rules[]`): no backreferences, no lookaround, counted repetition up to
 * 1000, at most MAX_STATES compiled states. Anything outside it is refused at start-up with the reason.
 *
 * Semantics follow JavaScript's `u` mode where both have the construct; matches are leftmost-longest
 * (not leftmost-first), which only changes which span a `redact` rule replaces.
 */

const MAX_REPEAT = 1000;
const MAX_DEPTH = 50;
/** Compiled states; bounds the per-character cost of a match. */
export const MAX_STATES = 5000;

type CharTest = (cp: number) => boolean;

type Node =
  | { t: 'empty' }
  | { t: 'char'; test: CharTest }
  | { t: 'cat'; items: Node[] }
  | { t: 'alt'; items: Node[] }
  | { t: 'rep'; node: Node; min: number; max: number }
  | { t: 'assert'; kind: AssertKind };

type AssertKind = 'bol' | 'eol' | 'word' | 'nonword';

/** The pattern is outside the firewall's language, or invalid. The message names the construct, never text to match. */
export class FirewallPatternError extends Error {}

const isDigit = (cp: number) => cp >= 48 && cp <= 57;
const isWordChar = (cp: number) => (cp >= 48 && cp <= 57) || (cp >= 65 && cp <= 90) || (cp >= 97 && cp <= 122) || cp === 95;
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

  parse(): Node {
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

  private alternation(): Node {
    const items = [this.concatenation()];
    while (this.peek() === 124 /* | */) {
      this.i++;
      items.push(this.concatenation());
    }
    return items.length === 1 ? items[0] : { t: 'alt', items };
  }

  private concatenation(): Node {
    const items: Node[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === 124 || c === 41) break;
      const atom = this.atom();
      items.push(this.quantified(atom));
    }
    if (items.length === 0) return { t: 'empty' };
    return items.length === 1 ? items[0] : { t: 'cat', items };
  }

  private quantified(atom: Node): Node {
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

  private atom(): Node {
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

  private literal(cp: number): Node {
    if (!this.ignoreCase) return { t: 'char', test: (x) => x === cp };
    const variants = caseVariants(cp);
    return variants.length === 1 ? { t: 'char', test: (x) => x === cp } : { t: 'char', test: (x) => variants.includes(x) };
  }

  private group(): Node {
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
  private atomEscape(): Node {
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

  private charClass(): Node {
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

function nullable(n: Node): boolean {
  switch (n.t) {
    case 'empty':
    case 'assert':
      return true;
    case 'char':
      return false;
    case 'cat':
      return n.items.every(nullable);
    case 'alt':
      return n.items.some(nullable);
    case 'rep':
      return n.min === 0 || nullable(n.node);
  }
}

// ---- Thompson NFA ----

const CHAR = 0;
const SPLIT = 1;
const ASSERT = 2;
const MATCH = 3;

interface Program {
  kind: Uint8Array;
  out: Int32Array;
  out2: Int32Array;
  tests: Array<CharTest | undefined>;
  asserts: Array<AssertKind | undefined>;
  start: number;
}

interface Frag {
  start: number;
  /** Dangling exits: state index × 2 + (0: out, 1: out2). */
  exits: number[];
}

class Compiler {
  kind: number[] = [];
  out: number[] = [];
  out2: number[] = [];
  tests: Array<CharTest | undefined> = [];
  asserts: Array<AssertKind | undefined> = [];

  add(kind: number, test?: CharTest, assert?: AssertKind): number {
    if (this.kind.length >= MAX_STATES) throw new FirewallPatternError(`the pattern compiles to more than ${MAX_STATES} states`);
    this.kind.push(kind);
    this.out.push(-1);
    this.out2.push(-1);
    this.tests.push(test);
    this.asserts.push(assert);
    return this.kind.length - 1;
  }

  patch(exits: number[], to: number): void {
    for (const e of exits) {
      if (e % 2 === 0) this.out[e / 2] = to;
      else this.out2[(e - 1) / 2] = to;
    }
  }

  /** A do-nothing state (a split whose two exits go to the same place), for empty fragments. */
  private epsilon(): Frag {
    const s = this.add(SPLIT);
    return { start: s, exits: [s * 2, s * 2 + 1] };
  }

  compile(n: Node): Frag {
    switch (n.t) {
      case 'empty':
        return this.epsilon();
      case 'char': {
        const s = this.add(CHAR, n.test);
        return { start: s, exits: [s * 2] };
      }
      case 'assert': {
        const s = this.add(ASSERT, undefined, n.kind);
        return { start: s, exits: [s * 2] };
      }
      case 'cat': {
        const first = this.compile(n.items[0]);
        let exits = first.exits;
        for (const item of n.items.slice(1)) {
          const f = this.compile(item);
          this.patch(exits, f.start);
          exits = f.exits;
        }
        return { start: first.start, exits };
      }
      case 'alt': {
        // A chain of splits: out → alternative i, out2 → the rest.
        const frags = n.items.map((item) => this.compile(item));
        let start = frags[frags.length - 1].start;
        for (let i = frags.length - 2; i >= 0; i--) {
          const s = this.add(SPLIT);
          this.out[s] = frags[i].start;
          this.out2[s] = start;
          start = s;
        }
        return { start, exits: frags.flatMap((f) => f.exits) };
      }
      case 'rep':
        return this.repeat(n.node, n.min, n.max);
    }
  }

  private repeat(node: Node, min: number, max: number): Frag {
    const parts: Frag[] = [];
    for (let i = 0; i < min; i++) parts.push(this.compile(node));
    if (max === Infinity) {
      const s = this.add(SPLIT);
      const body = this.compile(node);
      this.out[s] = body.start;
      this.patch(body.exits, s);
      parts.push({ start: s, exits: [s * 2 + 1] });
    } else {
      // x{0,k} as nested optionals (x(x(x)?)?)?, built from the innermost out.
      let tail: Frag | undefined;
      for (let i = min; i < max; i++) {
        const s = this.add(SPLIT);
        const body = this.compile(node);
        this.out[s] = body.start;
        if (tail) this.patch(body.exits, tail.start);
        tail = { start: s, exits: [s * 2 + 1, ...(tail ? tail.exits : body.exits)] };
      }
      if (tail) parts.push(tail);
    }
    if (parts.length === 0) return this.epsilon();
    for (let i = 0; i + 1 < parts.length; i++) this.patch(parts[i].exits, parts[i + 1].start);
    return { start: parts[0].start, exits: parts[parts.length - 1].exits };
  }
}

function build(root: Node): Program {
  const c = new Compiler();
  const f = c.compile(root);
  const m = c.add(MATCH);
  c.patch(f.exits, m);
  return {
    kind: Uint8Array.from(c.kind),
    out: Int32Array.from(c.out),
    out2: Int32Array.from(c.out2),
    tests: c.tests,
    asserts: c.asserts,
    start: f.start,
  };
}

// ---- Simulation ----

const MAX_DFA_STATES = 2000;
const MATCHED = 'matched' as const;

interface DState {
  /** NFA states entered at this position, before their epsilon closure (which depends on the next character). */
  kernel: number[];
  atStart: boolean;
  prevWord: boolean;
  ascii: Array<DState | typeof MATCHED | undefined>;
  other: Map<number, DState | typeof MATCHED>;
  endAccepts: boolean | undefined;
}

const cpBefore = (text: string, pos: number): number => {
  if (pos <= 0) return -1;
  const lo = text.charCodeAt(pos - 1);
  if (lo >= 0xdc00 && lo <= 0xdfff && pos >= 2) {
    const hi = text.charCodeAt(pos - 2);
    if (hi >= 0xd800 && hi <= 0xdbff) return text.codePointAt(pos - 2)!;
  }
  return lo;
};
const cpAt = (text: string, pos: number): number => (pos < text.length ? text.codePointAt(pos)! : -1);

/** A compiled firewall pattern: `test` and `findAll` run in time linear in the text. */
export class FirewallPattern {
  private constructor(
    private readonly prog: Program,
    /** Generation marks for de-duplicating states within one step. */
    private readonly mark: Int32Array,
  ) {}

  /**
   * Compiles a pattern of the firewall language; a leading `(?i)` makes it case-insensitive. Throws
   * FirewallPatternError naming the construct at fault (never any text).
   */
  static compile(pattern: string): FirewallPattern {
    let source = pattern;
    let ignoreCase = false;
    if (source.startsWith('(?i)')) {
      ignoreCase = true;
      source = source.slice(4);
    }
    const root = new Parser(source, ignoreCase).parse();
    if (nullable(root)) throw new FirewallPatternError('the pattern matches the empty string');
    const prog = build(root);
    return new FirewallPattern(prog, new Int32Array(prog.kind.length).fill(-1));
  }

  /** The current generation of `mark` (one per simulation step or DFA closure). */
  private gen = 0;
  /** DFA states built so far by `test`, by kernel key. */
  private dfa = new Map<string, DState>();

  /**
   * Adds state `s0` and its epsilon closure at text position `pos` to the list (states + starts),
   * skipping states already there this generation.
   */
  private addClosure(states: number[], starts: number[], s0: number, start: number, text: string, pos: number): void {
    const { kind, out, out2, asserts } = this.prog;
    const stack = [s0];
    while (stack.length) {
      const s = stack.pop()!;
      if (s < 0 || this.mark[s] === this.gen) continue;
      this.mark[s] = this.gen;
      switch (kind[s]) {
        case SPLIT:
          stack.push(out2[s], out[s]);
          break;
        case ASSERT:
          if (assertHolds(asserts[s]!, text, pos)) stack.push(out[s]);
          break;
        default:
          // CHAR and MATCH threads are kept; MATCH is read by the caller.
          states.push(s);
          starts.push(start);
      }
    }
  }

  /**
   * Whether the pattern matches anywhere in the text: the same NFA run as a lazily built DFA (each
   * set of NFA states met becomes one cached DFA state), so the usual cost is one table lookup per
   * character. When the cache outgrows MAX_DFA_STATES it is dropped and rebuilt as needed, which
   * bounds memory and keeps the cost per character at worst that of the NFA simulation.
   */
  test(text: string): boolean {
    let d = this.dfaStart();
    let pos = 0;
    const n = text.length;
    while (pos < n) {
      let cp = text.charCodeAt(pos);
      if (cp < 128) {
        const t = d.ascii[cp] ?? this.transition(d, cp);
        if (t === MATCHED) return true;
        d = t;
        pos++;
        continue;
      }
      cp = text.codePointAt(pos)!;
      const t = this.transition(d, cp);
      if (t === MATCHED) return true;
      d = t;
      pos += cp > 0xffff ? 2 : 1;
    }
    return this.acceptsAtEnd(d);
  }

  private dfaStart(): DState {
    return this.dState([this.prog.start], true, false);
  }

  private dState(kernel: number[], atStart: boolean, prevWord: boolean): DState {
    const sorted = [...new Set(kernel)].sort((a, b) => a - b);
    const key = `${atStart ? '^' : ''}${prevWord ? 'w' : ''}:${sorted.join(',')}`;
    let d = this.dfa.get(key);
    if (!d) {
      if (this.dfa.size >= MAX_DFA_STATES) this.dfa = new Map();
      d = { kernel: sorted, atStart, prevWord, ascii: new Array(128), other: new Map(), endAccepts: undefined };
      this.dfa.set(key, d);
    }
    return d;
  }

  /** The closure of a DFA state's kernel at a position whose next character is `next` (-1 at the end). */
  private closure(d: DState, next: number): { chars: number[]; matched: boolean } {
    const { kind, out, out2, asserts } = this.prog;
    this.gen++;
    const chars: number[] = [];
    let matched = false;
    const stack = [...d.kernel];
    while (stack.length) {
      const s = stack.pop()!;
      if (s < 0 || this.mark[s] === this.gen) continue;
      this.mark[s] = this.gen;
      switch (kind[s]) {
        case SPLIT:
          stack.push(out2[s], out[s]);
          break;
        case ASSERT:
          if (assertHoldsAt(asserts[s]!, d.atStart, d.prevWord, next)) stack.push(out[s]);
          break;
        case MATCH:
          matched = true;
          break;
        default:
          chars.push(s);
      }
    }
    return { chars, matched };
  }

  private transition(d: DState, cp: number): DState | typeof MATCHED {
    const cached = cp < 128 ? d.ascii[cp] : d.other.get(cp);
    if (cached !== undefined) return cached;
    const { chars, matched } = this.closure(d, cp);
    let result: DState | typeof MATCHED;
    if (matched) result = MATCHED;
    else {
      const { out, tests } = this.prog;
      const kernel = [this.prog.start];
      for (const s of chars) if (tests[s]!(cp)) kernel.push(out[s]);
      result = this.dState(kernel, false, isWordChar(cp));
    }
    if (cp < 128) d.ascii[cp] = result;
    else d.other.set(cp, result);
    return result;
  }

  private acceptsAtEnd(d: DState): boolean {
    d.endAccepts ??= this.closure(d, -1).matched;
    return d.endAccepts;
  }

  /** Every non-overlapping leftmost-longest match, as [start, end) UTF-16 offsets. */
  findAll(text: string): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    let from = 0;
    while (from <= text.length) {
      const m = this.find(text, from);
      if (!m) break;
      out.push(m);
      from = m[1] > m[0] ? m[1] : m[1] + 1;
    }
    return out;
  }

  /**
   * One NFA simulation from `from`. Threads carry their start offset; the state lists stay ordered by
   * start (new starts are appended last), and a state reached twice in one step keeps the earlier
   * start, whose future is the same: so the first thread to reach MATCH has the leftmost start, and
   * running on while threads of that start live gives the longest end.
   */
  private find(text: string, from: number): [number, number] | undefined {
    const { kind, out, tests } = this.prog;
    let states: number[] = [];
    let starts: number[] = [];
    let best: [number, number] | undefined;
    let pos = from;
    this.gen++;
    for (;;) {
      // `states` holds the closure at `pos` under the current generation; a new start joins last.
      if (!best) this.addClosure(states, starts, this.prog.start, pos, text, pos);
      for (let k = 0; k < states.length; k++) {
        if (kind[states[k]] !== MATCH) continue;
        const st = starts[k];
        if (!best || st < best[0] || (st === best[0] && pos > best[1])) best = [st, pos];
      }
      if (best) {
        // Only threads that could still give a start at or before the best one a match are worth running.
        const b = best[0];
        const keepS: number[] = [];
        const keepT: number[] = [];
        for (let k = 0; k < states.length; k++) {
          if (starts[k] <= b && kind[states[k]] === CHAR) {
            keepS.push(states[k]);
            keepT.push(starts[k]);
          }
        }
        states = keepS;
        starts = keepT;
        if (states.length === 0) return best;
      }
      if (pos >= text.length) return best;
      const cp = text.codePointAt(pos)!;
      const next = pos + (cp > 0xffff ? 2 : 1);
      const ns: number[] = [];
      const nt: number[] = [];
      this.gen++;
      for (let k = 0; k < states.length; k++) {
        const s = states[k];
        if (kind[s] === CHAR && tests[s]!(cp)) this.addClosure(ns, nt, out[s], starts[k], text, next);
      }
      states = ns;
      starts = nt;
      pos = next;
    }
  }
}

function assertHoldsAt(kind: AssertKind, atStart: boolean, prevWord: boolean, next: number): boolean {
  switch (kind) {
    case 'bol':
      return atStart;
    case 'eol':
      return next < 0;
    case 'word':
      return prevWord !== (next >= 0 && isWordChar(next));
    case 'nonword':
      return prevWord === (next >= 0 && isWordChar(next));
  }
}

function assertHolds(kind: AssertKind, text: string, pos: number): boolean {
  switch (kind) {
    case 'bol':
      return pos === 0;
    case 'eol':
      return pos === text.length;
    case 'word':
    case 'nonword': {
      const a = cpBefore(text, pos);
      const b = cpAt(text, pos);
      const boundary = (a >= 0 && isWordChar(a)) !== (b >= 0 && isWordChar(b));
      return kind === 'word' ? boundary : !boundary;
    }
  }
}

/** Why a pattern is refused (config error text, naming the construct), or undefined when it is accepted. */
export function firewallPatternProblem(pattern: string): string | undefined {
  try {
    FirewallPattern.compile(pattern);
    return undefined;
  } catch (err) {
    if (err instanceof FirewallPatternError) return describePatternError(err);
    throw err;
  }
}

/** The config-error text for a refused pattern. */
export const describePatternError = (err: FirewallPatternError): string =>
  `invalid regular expression for the firewall's linear-time matcher: ${err.message}`;
