/**
 * The compiler of the pattern language: a syntax tree (pattern-parser.ts) becomes a Thompson NFA, a
 * flat program of states whose size bounds the per-character cost of a match (pattern-matcher.ts).
 */
import { FirewallPatternError, type AssertKind, type CharTest, type PatternNode } from './pattern-parser';

/** Compiled states; bounds the per-character cost of a match. */
export const MAX_STATES = 5000;

/** The four kinds of state: consume one character, fork, check a position, accept. */
export const CHAR = 0;
export const SPLIT = 1;
export const ASSERT = 2;
export const MATCH = 3;

/** The NFA as parallel arrays indexed by state; `out2` is a split's second exit. */
export interface Program {
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

  compile(n: PatternNode): Frag {
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

  private repeat(node: PatternNode, min: number, max: number): Frag {
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

/** The program of a parsed pattern: its states, then one MATCH state every path that matches ends in. */
export function compileProgram(root: PatternNode): Program {
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
