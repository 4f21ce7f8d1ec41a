import { ownValue } from '../../common/own-key';
import { inlineRefs, isSchema, mergeAllOf, Schema } from '../json-schema/json-schema';

/**
 * JSON Schema → Gemini's `responseSchema`, an OpenAPI 3.0 subset that
 * answers 400 INVALID_ARGUMENT "Unknown name …" for any keyword outside it. Used for models whose
 * `structured_output` is `converted_schema` (the ones without `responseJsonSchema`):
 * - `$ref`s are inlined and `$defs`/`definitions` dropped (a recursive schema cannot be, and dispatch
 *   skips such a target before this runs);
 * - `const` → a one-value `enum`; `enum` is kept only when every value is a string (Gemini's enums
 *   are string-only), and then `type` is `string`; other values only give a missing `type`;
 * - `type: [T, "null"]` → `type: T, nullable: true`; several non-null types → `anyOf`;
 *   `anyOf`/`oneOf` members that are only `{type: "null"}` → `nullable` on the rest;
 * - `allOf` is merged into one schema (properties and required united);
 * - `format` is kept only where Gemini takes it (string: enum, date-time; number: float, double;
 *   integer: int32, int64); `examples` → `example`;
 * - object properties keep their order through `propertyOrdering` (Gemini otherwise sorts them);
 * - anything else (`additionalProperties`, `$schema`, `$id`, `patternProperties`, `exclusive*`,
 *   `multipleOf`, `uniqueItems`, `not`, `if`/`then`/`else`, `prefixItems`, …) is dropped: the
 *   answer may then be looser than the schema, never refused.
 */
export const GEMINI_SCHEMA_KEYS: ReadonlySet<string> = new Set([
  'type', 'format', 'title', 'description', 'nullable', 'enum', 'maxItems', 'minItems', 'properties', 'required', 'minProperties',
  'maxProperties', 'minLength', 'maxLength', 'pattern', 'example', 'anyOf', 'propertyOrdering', 'default', 'items', 'minimum', 'maximum',
]);

const FORMATS: Readonly<Record<string, readonly string[]>> = {
  string: ['enum', 'date-time'],
  number: ['float', 'double'],
  integer: ['int32', 'int64'],
};

const isNullOnly = (s: unknown) => isSchema(s) && s.type === 'null' && Object.keys(s).every((k) => k === 'type' || k === 'description' || k === 'title');

function convert(input: Schema): Schema {
  let s = mergeAllOf(input);
  const out: Schema = {};

  // Union branches: null-only members become `nullable`; one member left is merged into the parent.
  const branches = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
  if (branches) {
    const { anyOf: _a, oneOf: _o, ...rest } = s;
    const nonNull = branches.filter((b) => !isNullOnly(b)).filter(isSchema);
    const nullable = nonNull.length < branches.length;
    if (nonNull.length === 1) {
      s = { ...rest, ...mergeAllOf(nonNull[0]) };
    } else {
      s = rest;
      out.anyOf = nonNull.map(convert);
    }
    if (nullable) out.nullable = true;
  }

  let type = s.type;
  if (Array.isArray(type)) {
    const types = type.filter((t): t is string => typeof t === 'string' && t !== 'null');
    if (types.length < type.length) out.nullable = true;
    if (types.length > 1) {
      out.anyOf = types.map((t) => convert({ ...s, type: t }));
      type = undefined;
    } else type = types[0];
  } else if (type === 'null') {
    out.nullable = true;
    type = 'string';
  }
  if (typeof type === 'string' && !out.anyOf) out.type = type;

  let values: unknown[] | undefined = 'const' in s ? [s.const] : Array.isArray(s.enum) ? s.enum : undefined;
  if (values) {
    values = values.filter((v) => v !== null || !out.nullable);
    if (values.length > 0 && values.every((v) => typeof v === 'string')) {
      out.type = 'string';
      out.enum = values;
    } else if (out.type === undefined && !out.anyOf && values.length > 0) {
      // A typeless schema is refused: the values' own type keeps the answer's type right.
      const v = values.filter((x) => x !== null);
      if (v.length && v.every((x) => typeof x === 'boolean')) out.type = 'boolean';
      else if (v.length && v.every((x) => Number.isInteger(x))) out.type = 'integer';
      else if (v.length && v.every((x) => typeof x === 'number')) out.type = 'number';
    }
  }

  for (const [k, v] of Object.entries(s)) {
    if (!GEMINI_SCHEMA_KEYS.has(k) || Object.hasOwn(out, k) || k === 'enum' || k === 'type' || k === 'anyOf') continue;
    if (k === 'properties' && isSchema(v)) {
      out.properties = Object.fromEntries(Object.entries(v).filter(([, p]) => isSchema(p)).map(([name, p]) => [name, convert(p as Schema)]));
      if (!Array.isArray(s.propertyOrdering)) out.propertyOrdering = Object.keys(out.properties as Schema);
    } else if (k === 'items') {
      if (isSchema(v)) out.items = convert(v);
      else if (Array.isArray(v) && isSchema(v[0])) out.items = convert(v[0]);
    } else if (k === 'format') {
      if (typeof v === 'string' && typeof out.type === 'string' && ownValue(FORMATS, out.type)?.includes(v)) out.format = v;
    } else if (k === 'required') {
      const props = isSchema(s.properties) ? s.properties : {};
      const names = Array.isArray(v) ? v.filter((n): n is string => typeof n === 'string' && Object.prototype.hasOwnProperty.call(props, n)) : [];
      if (names.length) out.required = names;
    } else out[k] = v;
  }
  if (!('example' in out) && Array.isArray(s.examples) && s.examples.length > 0) out.example = s.examples[0];
  if (out.items === undefined && Array.isArray(s.prefixItems) && isSchema(s.prefixItems[0])) out.items = convert(s.prefixItems[0]);
  return out;
}

/** The request's JSON schema as a Gemini `responseSchema`. Throws SchemaInlineError for a schema that cannot be inlined. */
export function toResponseSchema(schema: Schema): Schema {
  return convert(inlineRefs(schema));
}
