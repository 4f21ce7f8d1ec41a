import { keyedMap, ownValue } from '../common/own-key';

/**
 * A small declarative validator for the raw config tree: each node parses `unknown` into a typed
 * value or throws a ConfigError naming the dotted path of the bad field (docs/architecture.md
 * "Configuration in one validated file": raw-then-validated, unknown keys refused).
 */
export class ConfigError extends Error {
  constructor(
    readonly path: string,
    readonly detail: string,
  ) {
    super(path ? `${path}: ${detail}` : detail);
    this.name = 'ConfigError';
  }
}

export type Node<T> = { parse(value: unknown, path: string): T; optional?: boolean; fallback?: () => T };
export type Infer<N> = N extends Node<infer T> ? T : never;

const kind = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
const join = (path: string, key: string | number): string => (path ? `${path}.${key}` : String(key));

export const str = (opts: { min?: number; pattern?: RegExp; what?: string } = {}): Node<string> => ({
  parse(v, path) {
    if (typeof v !== 'string') throw new ConfigError(path, `expected a string, got ${kind(v)}`);
    if (opts.min !== undefined && v.length < opts.min) throw new ConfigError(path, `must not be empty`);
    if (opts.pattern && !opts.pattern.test(v)) throw new ConfigError(path, `must be ${opts.what ?? `a string matching ${opts.pattern}`}`);
    return v;
  },
});

export const num = (opts: { min?: number; max?: number; int?: boolean } = {}): Node<number> => ({
  parse(v, path) {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new ConfigError(path, `expected a number, got ${kind(v)}`);
    if (opts.int && !Number.isInteger(v)) throw new ConfigError(path, `expected an integer, got ${v}`);
    if (opts.min !== undefined && v < opts.min) throw new ConfigError(path, `must be at least ${opts.min}, got ${v}`);
    if (opts.max !== undefined && v > opts.max) throw new ConfigError(path, `must be at most ${opts.max}, got ${v}`);
    return v;
  },
});

export const int = (opts: { min?: number; max?: number } = {}): Node<number> => num({ ...opts, int: true });

export const bool = (): Node<boolean> => ({
  parse(v, path) {
    if (typeof v !== 'boolean') throw new ConfigError(path, `expected true or false, got ${kind(v)}`);
    return v;
  },
});

export const oneOf = <const T extends string>(values: readonly T[]): Node<T> => ({
  parse(v, path) {
    if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) {
      throw new ConfigError(path, `must be one of ${values.join(', ')}, got ${JSON.stringify(v)}`);
    }
    return v as T;
  },
});

export const arr = <T>(item: Node<T>, opts: { min?: number } = {}): Node<T[]> => ({
  parse(v, path) {
    if (!Array.isArray(v)) throw new ConfigError(path, `expected a list, got ${kind(v)}`);
    if (opts.min !== undefined && v.length < opts.min) throw new ConfigError(path, `must have at least ${opts.min} item(s)`);
    return v.map((x, i) => item.parse(x, join(path, i)));
  },
});

/** A map with free keys (ids) and uniform values; any key, `__proto__` included, is just a key of it. */
export const record = <T>(value: Node<T>, key?: Node<string>): Node<Record<string, T>> => ({
  parse(v, path) {
    if (v === null || v === undefined) return keyedMap<T>();
    if (kind(v) !== 'object') throw new ConfigError(path, `expected a map, got ${kind(v)}`);
    const out = keyedMap<T>();
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (key) key.parse(k, join(path, k));
      out[k] = value.parse(x, join(path, k));
    }
    return out;
  },
});

export const optional = <T>(node: Node<T>): Node<T | undefined> => ({ parse: node.parse, optional: true });
export const withDefault = <T>(node: Node<T>, fallback: T): Node<T> => ({ parse: node.parse, optional: true, fallback: () => fallback });
export const nullable = <T>(node: Node<T>): Node<T | null> => ({
  parse: (v, path) => (v === null ? null : node.parse(v, path)),
});

type Shape = Record<string, Node<unknown>>;
type ObjOut<S extends Shape> = { [K in keyof S as S[K] extends { optional: true } ? never : K]: Infer<S[K]> } & {
  [K in keyof S as S[K] extends { optional: true } ? K : never]?: Infer<S[K]>;
};

/** An object with a fixed set of keys; unknown keys are refused. */
export const obj = <S extends Shape>(shape: S): Node<ObjOut<S>> => ({
  parse(v, path) {
    if (v === null || kind(v) !== 'object') throw new ConfigError(path, `expected a map, got ${kind(v)}`);
    const input = v as Record<string, unknown>;
    for (const k of Object.keys(input)) {
      if (!Object.prototype.hasOwnProperty.call(shape, k)) {
        throw new ConfigError(join(path, k), `unknown key (allowed: ${Object.keys(shape).join(', ')})`);
      }
    }
    const out: Record<string, unknown> = {};
    for (const [k, node] of Object.entries(shape)) {
      const x = ownValue(input, k);
      if (x === undefined) {
        if (node.fallback) out[k] = node.fallback();
        else if (!node.optional) throw new ConfigError(join(path, k), 'is required');
        continue;
      }
      out[k] = node.parse(x, join(path, k));
    }
    return out as ObjOut<S>;
  },
});

export const custom = <T>(fn: (v: unknown, path: string) => T): Node<T> => ({ parse: fn });
