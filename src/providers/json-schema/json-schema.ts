/**
 * JSON Schema helpers shared by the families that take `response_format: json_schema` and by the
 * offline mock: local `$ref` resolution, inlining (for upstreams whose schema dialect has no `$ref`),
 * and a minimal valid instance (the mock's deterministic answers and tool arguments).
 */
import { ownValue } from '../../common/own-key';

export type Schema = Record<string, unknown>;

export const isSchema = (v: unknown): v is Schema => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Why a schema cannot be inlined; dispatch names it when no target can take the schema as it is. */
export class SchemaInlineError extends Error {
  constructor(
    readonly reason: 'cycle' | 'too_large' | 'unresolved',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Nodes an inlined schema may have. Refs form a graph, and a graph where each definition uses the
 * next twice doubles at every step: the bound keeps one request from building an exponential schema.
 */
export const MAX_INLINED_NODES = 10_000;

/** `#`, `#/$defs/X`, `#/definitions/X` or any local JSON pointer; undefined when it does not resolve (or is not local). */
export function resolveRef(root: Schema, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isSchema(node) && !Array.isArray(node)) return undefined;
    if (!Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** Every `$ref` string in a schema (definitions included), for edge validation. */
export function refsOf(schema: unknown, out: string[] = []): string[] {
  if (Array.isArray(schema)) schema.forEach((s) => refsOf(s, out));
  else if (isSchema(schema)) {
    for (const [k, v] of Object.entries(schema)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else if (k !== 'enum' && k !== 'const' && k !== 'default' && k !== 'examples') refsOf(v, out);
    }
  }
  return out;
}

/**
 * The schema with every local `$ref` replaced by what it points to (sibling keywords of the `$ref`
 * kept on top) and `$defs`/`definitions` removed. Throws SchemaInlineError for a cycle (a recursive
 * schema has no finite inlined form), an unresolved ref, or more than MAX_INLINED_NODES nodes.
 */
export function inlineRefs(schema: Schema): Schema {
  let nodes = 0;
  const walk = (node: unknown, stack: readonly string[]): unknown => {
    if (++nodes > MAX_INLINED_NODES) throw new SchemaInlineError('too_large', `the schema has more than ${MAX_INLINED_NODES} nodes once its $refs are inlined`);
    if (Array.isArray(node)) return node.map((n) => walk(n, stack));
    if (!isSchema(node)) return node;
    let base: Schema = node;
    let inner = stack;
    if (typeof node.$ref === 'string') {
      const ref = node.$ref;
      if (stack.includes(ref)) throw new SchemaInlineError('cycle', `the schema is recursive ($ref "${ref}" refers to itself), so it cannot be inlined`);
      const target = resolveRef(schema, ref);
      if (!isSchema(target)) throw new SchemaInlineError('unresolved', `$ref "${ref}" does not resolve to a schema in this document`);
      const { $ref: _ref, ...siblings } = node;
      base = { ...target, ...siblings };
      inner = [...stack, ref];
      if (typeof base.$ref === 'string') return walk(base, inner);
    }
    const out: Schema = {};
    for (const [k, v] of Object.entries(base)) {
      if (k === '$defs' || k === 'definitions') continue;
      // Values, not schemas: copied as they are.
      if (k === 'enum' || k === 'const' || k === 'default' || k === 'examples' || k === 'example') out[k] = v;
      else if (k === 'properties' || k === 'patternProperties') {
        out[k] = isSchema(v) ? Object.fromEntries(Object.entries(v).map(([name, s]) => [name, walk(s, inner)])) : v;
      } else out[k] = walk(v, inner);
    }
    return out;
  };
  return walk(schema, []) as Schema;
}

/** Why `inlineRefs` would fail on this schema, or undefined when it can be inlined. */
export function inlineProblem(schema: Schema): SchemaInlineError | undefined {
  try {
    inlineRefs(schema);
    return undefined;
  } catch (err) {
    if (err instanceof SchemaInlineError) return err;
    throw err;
  }
}

/** Nesting depth past which the generator stops following a recursive schema (it answers null there). */
const MAX_INSTANCE_DEPTH = 24;

const FORMAT_EXAMPLES: Readonly<Record<string, string>> = {
  'date-time': '1970-01-01T00:00:00Z',
  date: '1970-01-01',
  time: '00:00:00Z',
  email: 'mock@example.com',
  uri: 'https://example.com/',
  url: 'https://example.com/',
  uuid: '00000000-0000-4000-8000-000000000000',
  ipv4: '127.0.0.1',
  ipv6: '::1',
  hostname: 'example.com',
};

/**
 * `allOf` folded into the schema, nested `allOf`s first: `properties` and `required` united, any
 * other keyword kept from the first schema that has it (the outer one, then the parts in order).
 */
export function mergeAllOf(schema: Schema): Schema {
  if (!Array.isArray(schema.allOf)) return schema;
  const { allOf, ...rest } = schema;
  const merged: Schema = { ...rest };
  for (const p of allOf.filter(isSchema).map(mergeAllOf)) {
    for (const [k, v] of Object.entries(p)) {
      if (k === 'properties' && isSchema(v)) merged.properties = { ...(isSchema(merged.properties) ? merged.properties : {}), ...v };
      else if (k === 'required' && Array.isArray(v)) merged.required = [...new Set([...(Array.isArray(merged.required) ? merged.required : []), ...v])];
      else if (!Object.hasOwn(merged, k)) merged[k] = v;
    }
  }
  return merged;
}

function stringOf(s: Schema): string {
  const fmt = typeof s.format === 'string' ? ownValue(FORMAT_EXAMPLES, s.format) : undefined;
  let v = fmt ?? 'mock';
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const max = typeof s.maxLength === 'number' ? s.maxLength : Infinity;
  if (v.length < min) v = v.padEnd(min, 'x');
  if (v.length > max) v = v.slice(0, max);
  return v;
}

function numberOf(s: Schema, integer: boolean): number {
  const exMin = typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum : undefined;
  const exMax = typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum : undefined;
  const lo = typeof s.minimum === 'number' ? s.minimum : exMin !== undefined ? exMin + (integer ? 1 : 0.5) : undefined;
  const hi = typeof s.maximum === 'number' ? s.maximum : exMax !== undefined ? exMax - (integer ? 1 : 0.5) : undefined;
  let v = lo ?? (hi !== undefined && hi < 0 ? hi : 0);
  if (integer) v = Math.ceil(v);
  const step = typeof s.multipleOf === 'number' && s.multipleOf > 0 ? s.multipleOf : undefined;
  if (step) v = Math.ceil(v / step) * step;
  if (exMin !== undefined && v <= exMin) v = integer ? Math.floor(exMin) + 1 : exMin + (step ?? 0.5);
  return v;
}

/**
 * A deterministic, minimal instance valid against the schema: required properties only, the first
 * enum value or `const`, the first branch of `anyOf`/`oneOf`, `allOf` merged, `minItems` items,
 * numbers at their lower bound, strings of the right format and length, local `$ref`s followed.
 * `pattern` is not honoured (a generator for regular expressions is out of a mock's reach).
 */
export function minimalInstance(schema: unknown, root: Schema = isSchema(schema) ? schema : {}, depth = 0): unknown {
  if (!isSchema(schema) || depth > MAX_INSTANCE_DEPTH) return null;
  if (typeof schema.$ref === 'string') {
    const { $ref, ...siblings } = schema;
    const target = resolveRef(root, $ref);
    return minimalInstance(isSchema(target) ? { ...target, ...siblings } : siblings, root, depth + 1);
  }
  const s = mergeAllOf(schema);
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  const branches = (Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined)?.filter(isSchema);
  if (branches && branches.length > 0 && s.type === undefined) {
    const { anyOf: _a, oneOf: _o, ...rest } = s;
    return minimalInstance({ ...rest, ...branches[0] }, root, depth + 1);
  }
  let type = s.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? type[0];
  if (type === undefined) type = isSchema(s.properties) || Array.isArray(s.required) ? 'object' : s.items !== undefined ? 'array' : undefined;
  switch (type) {
    case 'object': {
      const props = isSchema(s.properties) ? s.properties : {};
      // Property names are the client's: built from entries, so even `__proto__` is a plain key of the instance.
      const entries: Array<[string, unknown]> = [];
      for (const name of Array.isArray(s.required) ? s.required : []) {
        if (typeof name !== 'string') continue;
        const p = Object.prototype.hasOwnProperty.call(props, name) ? props[name] : isSchema(s.additionalProperties) ? s.additionalProperties : {};
        entries.push([name, minimalInstance(p, root, depth + 1)]);
      }
      return Object.fromEntries(entries);
    }
    case 'array': {
      const n = typeof s.minItems === 'number' ? s.minItems : 0;
      const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
      const item = isSchema(s.items) ? s.items : {};
      return Array.from({ length: Math.max(n, 0) }, (_, i) => minimalInstance(i < prefix.length ? prefix[i] : item, root, depth + 1));
    }
    case 'string':
      return stringOf(s);
    case 'integer':
      return numberOf(s, true);
    case 'number':
      return numberOf(s, false);
    case 'boolean':
      return false;
    default:
      return null;
  }
}
