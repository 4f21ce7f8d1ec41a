/**
 * The matcher of the pattern language: a compiled program (pattern-compiler.ts) simulated over the
 * text with one set of states per position, never backtracking, so a match costs O(text length ×
 * program states) whatever the pattern. Matches are leftmost-longest (not JavaScript's
 * leftmost-first), which only changes which span a `redact` rule replaces.
 */
import { ASSERT, CHAR, compileProgram, MATCH, SPLIT, type Program } from './pattern-compiler';
import { isWordChar, parsePattern, type AssertKind } from './pattern-parser';

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
/** Whether the character before `pos` is a word character (false at the start), for `\b` and `\B`. */
const wordBefore = (text: string, pos: number): boolean => {
  const cp = cpBefore(text, pos);
  return cp >= 0 && isWordChar(cp);
};

/**
 * Whether an assertion holds at a position, known by whether it is the start of the text, whether
 * the character before it is a word character, and the character after it (-1 at the end).
 */
function assertHolds(kind: AssertKind, atStart: boolean, prevWord: boolean, next: number): boolean {
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
    const prog = compileProgram(parsePattern(pattern));
    return new FirewallPattern(prog, new Int32Array(prog.kind.length).fill(-1));
  }

  /** The current generation of `mark` (one per simulation step or DFA closure). */
  private gen = 0;
  /** DFA states built so far by `test`, by kernel key. */
  private dfa = new Map<string, DState>();

  /**
   * The epsilon closure of the states on `stack` (which it empties) at one position: splits are
   * followed, an assertion only where it holds, and each CHAR or MATCH state reached is appended to
   * `reached`, skipping states already marked this generation. The NFA simulation (`find`) and the
   * DFA construction (`closure`) both walk through here.
   */
  private close(stack: number[], atStart: boolean, prevWord: boolean, next: number, reached: number[]): void {
    const { kind, out, out2, asserts } = this.prog;
    while (stack.length) {
      const s = stack.pop()!;
      if (s < 0 || this.mark[s] === this.gen) continue;
      this.mark[s] = this.gen;
      switch (kind[s]) {
        case SPLIT:
          stack.push(out2[s], out[s]);
          break;
        case ASSERT:
          if (assertHolds(asserts[s]!, atStart, prevWord, next)) stack.push(out[s]);
          break;
        default:
          reached.push(s);
      }
    }
  }

  /** Adds state `s0` and its closure at a position to the thread list (states + their starts). */
  private addThreads(states: number[], starts: number[], s0: number, start: number, atStart: boolean, prevWord: boolean, next: number): void {
    const from = states.length;
    this.close([s0], atStart, prevWord, next, states);
    for (let k = from; k < states.length; k++) starts.push(start);
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

  /**
   * The closure of a DFA state's kernel at a position whose next character is `next` (-1 at the
   * end): the states reached (CHAR states only, unless it matched) and whether MATCH is among them.
   */
  private closure(d: DState, next: number): { chars: number[]; matched: boolean } {
    this.gen++;
    const chars: number[] = [];
    this.close([...d.kernel], d.atStart, d.prevWord, next, chars);
    const { kind } = this.prog;
    return { chars, matched: chars.some((s) => kind[s] === MATCH) };
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
    // What the assertions see at `pos`: the character before it and the one at it.
    let prevWord = wordBefore(text, pos);
    let cp = cpAt(text, pos);
    this.gen++;
    for (;;) {
      // `states` holds the closure at `pos` under the current generation; a new start joins last.
      if (!best) this.addThreads(states, starts, this.prog.start, pos, pos === 0, prevWord, cp);
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
      const next = pos + (cp > 0xffff ? 2 : 1);
      const nextPrevWord = wordBefore(text, next);
      const nextCp = cpAt(text, next);
      const ns: number[] = [];
      const nt: number[] = [];
      this.gen++;
      for (let k = 0; k < states.length; k++) {
        const s = states[k];
        if (kind[s] === CHAR && tests[s]!(cp)) this.addThreads(ns, nt, out[s], starts[k], false, nextPrevWord, nextCp);
      }
      states = ns;
      starts = nt;
      pos = next;
      prevWord = nextPrevWord;
      cp = nextCp;
    }
  }
}
