import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SchemaInlineError } from '../json-schema/json-schema';
import { GEMINI_SCHEMA_KEYS, toResponseSchema } from './gemini-schema';

const fixture = (name: string) => JSON.parse(readFileSync(join(__dirname, 'fixtures', name), 'utf8')) as Record<string, unknown>;

/** Every key of every schema node (property names are not keywords, so `properties` maps are walked by value). */
function keywords(schema: unknown, out = new Set<string>()): Set<string> {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return out;
  for (const [k, v] of Object.entries(schema)) {
    out.add(k);
    if (k === 'properties') Object.values(v as object).forEach((p) => keywords(p, out));
    else if (k === 'items') keywords(v, out);
    else if (k === 'anyOf') (v as unknown[]).forEach((p) => keywords(p, out));
  }
  return out;
}

const ADDRESS = { type: 'object', properties: { city: { type: 'string', example: 'Paris' }, zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['city'], propertyOrdering: ['city', 'zip'] };

describe('Gemini responseSchema conversion', () => {
  it('converts the recorded schema: refs inlined, unknown keywords gone, const/null/oneOf/allOf rewritten', () => {
    expect(toResponseSchema(fixture('structured-output-schema.json'))).toEqual({
      title: 'Order',
      type: 'object',
      properties: {
        id: { type: 'string' },
        status: { type: 'string', enum: ['open'] },
        placed: { type: 'string', format: 'date-time' },
        ship_to: ADDRESS,
        bill_to: { ...ADDRESS, nullable: true },
        lines: {
          type: 'array',
          minItems: 1,
          items: { type: 'object', properties: { sku: { type: 'string' }, qty: { type: 'integer', format: 'int32' } }, required: ['sku', 'qty'], propertyOrdering: ['sku', 'qty'] },
        },
        note: { type: 'string', nullable: true, maxLength: 200 },
        priority: { type: 'integer' },
        channel: { anyOf: [{ type: 'string', enum: ['web', 'phone'] }, { type: 'integer' }] },
        meta: { type: 'object' },
      },
      required: ['id', 'status', 'ship_to', 'lines'],
      propertyOrdering: ['id', 'status', 'placed', 'ship_to', 'bill_to', 'lines', 'note', 'priority', 'channel', 'meta'],
    });
  });

  it('never sends a keyword outside Gemini\'s Schema', () => {
    const used = keywords(toResponseSchema(fixture('structured-output-schema.json')));
    for (const k of used) expect(GEMINI_SCHEMA_KEYS.has(k)).toBe(true);
    for (const k of ['$ref', '$defs', '$schema', '$id', 'additionalProperties', 'const', 'oneOf', 'allOf', 'examples', 'uniqueItems', 'exclusiveMinimum', 'multipleOf', 'patternProperties']) {
      expect(used.has(k)).toBe(false);
    }
  });

  it('several non-null types become anyOf; a format Gemini does not take for the type is dropped', () => {
    expect(toResponseSchema({ type: ['string', 'integer', 'null'] })).toEqual({ nullable: true, anyOf: [{ type: 'string' }, { type: 'integer' }] });
    expect(toResponseSchema({ type: 'string', format: 'email' })).toEqual({ type: 'string' });
    expect(toResponseSchema({ type: 'number', format: 'double' })).toEqual({ type: 'number', format: 'double' });
  });

  it('refuses a recursive schema', () => {
    expect(() => toResponseSchema({ type: 'object', properties: { kids: { type: 'array', items: { $ref: '#' } } } })).toThrow(SchemaInlineError);
  });
});
