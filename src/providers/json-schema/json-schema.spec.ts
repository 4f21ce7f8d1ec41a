import { z } from 'zod';
import { inlineProblem, inlineRefs, MAX_INLINED_NODES, minimalInstance, refsOf, resolveRef, SchemaInlineError } from './json-schema';

const ADDRESS = { type: 'object', properties: { city: { type: 'string' }, zip: { type: 'string', minLength: 5 } }, required: ['city', 'zip'] };

describe('resolveRef', () => {
  const root = { $defs: { A: { type: 'string' }, 'a/b': { type: 'number' } }, definitions: { B: { type: 'integer' } } };
  it.each([
    ['#', root],
    ['#/$defs/A', { type: 'string' }],
    ['#/definitions/B', { type: 'integer' }],
    ['#/$defs/a~1b', { type: 'number' }],
  ])('%s resolves', (ref, expected) => expect(resolveRef(root, ref)).toEqual(expected));

  it.each(['#/$defs/Missing', 'https://example.com/s.json', 'other.json#/x', '#/$defs/A/type/length'])('%s does not resolve', (ref) => {
    expect(resolveRef(root, ref)).toBeUndefined();
  });

  it('lists every $ref, definitions included, but not values that look like refs', () => {
    expect(refsOf({ properties: { a: { $ref: '#/$defs/A' } }, $defs: { A: { items: { $ref: '#/$defs/B' } } }, enum: [{ $ref: 'x' }] })).toEqual(['#/$defs/A', '#/$defs/B']);
  });
});

describe('inlineRefs', () => {
  it('replaces $refs by their definitions (nested, repeated, with siblings) and drops $defs', () => {
    const schema = {
      type: 'object',
      properties: {
        home: { $ref: '#/$defs/Address' },
        work: { $ref: '#/$defs/Address', description: 'office' },
        trips: { type: 'array', items: { $ref: '#/definitions/Trip' } },
      },
      $defs: { Address: ADDRESS },
      definitions: { Trip: { type: 'object', properties: { to: { $ref: '#/$defs/Address' } } } },
    };
    expect(inlineRefs(schema)).toEqual({
      type: 'object',
      properties: {
        home: ADDRESS,
        work: { ...ADDRESS, description: 'office' },
        trips: { type: 'array', items: { type: 'object', properties: { to: ADDRESS } } },
      },
    });
  });

  it('keeps values as they are: an enum or default holding a $ref-like object is not followed', () => {
    expect(inlineRefs({ enum: [{ $ref: '#/nope' }], default: { $ref: '#/nope' } })).toEqual({ enum: [{ $ref: '#/nope' }], default: { $ref: '#/nope' } });
  });

  it('refuses a recursive schema (self, through a definition, through #)', () => {
    const cycles = [
      { $defs: { Node: { type: 'object', properties: { next: { $ref: '#/$defs/Node' } } } }, $ref: '#/$defs/Node' },
      { $defs: { A: { properties: { b: { $ref: '#/$defs/B' } } }, B: { items: { $ref: '#/$defs/A' } } }, properties: { a: { $ref: '#/$defs/A' } } },
      { type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } } },
    ];
    for (const s of cycles) {
      expect(() => inlineRefs(s)).toThrow(SchemaInlineError);
      expect(inlineProblem(s)?.reason).toBe('cycle');
    }
  });

  it('refuses a schema that would blow up once inlined, and one with a dangling ref', () => {
    const defs: Record<string, unknown> = { D0: { type: 'string' } };
    for (let i = 1; i <= 20; i++) defs[`D${i}`] = { type: 'object', properties: { a: { $ref: `#/$defs/D${i - 1}` }, b: { $ref: `#/$defs/D${i - 1}` } } };
    expect(inlineProblem({ $ref: '#/$defs/D20', $defs: defs })?.reason).toBe('too_large');
    expect(MAX_INLINED_NODES).toBeLessThan(2 ** 20);
    expect(inlineProblem({ properties: { a: { $ref: '#/$defs/X' } } })?.reason).toBe('unresolved');
    expect(inlineProblem({ properties: { a: { $ref: '#/$defs/A' } }, $defs: { A: ADDRESS } })).toBeUndefined();
  });
});

describe('minimalInstance', () => {
  it.each([
    [{ type: 'string' }, 'mock'],
    [{ type: 'string', minLength: 6 }, 'mockxx'],
    [{ type: 'string', maxLength: 2 }, 'mo'],
    [{ type: 'string', format: 'date-time' }, '1970-01-01T00:00:00Z'],
    [{ type: 'string', format: 'email' }, 'mock@example.com'],
    [{ type: 'integer', minimum: 3 }, 3],
    [{ type: 'integer', exclusiveMinimum: 3 }, 4],
    [{ type: 'number', minimum: 0.5, multipleOf: 2 }, 2],
    [{ type: 'number', maximum: -4 }, -4],
    [{ type: 'boolean' }, false],
    [{ type: 'null' }, null],
    [{ type: ['null', 'string'] }, 'mock'],
    [{ enum: ['red', 'green'] }, 'red'],
    [{ const: 42 }, 42],
    [{ anyOf: [{ type: 'integer' }, { type: 'string' }] }, 0],
    [{ type: 'array', items: { type: 'string' } }, []],
    [{ type: 'array', items: { type: 'integer' }, minItems: 2 }, [0, 0]],
    [{ type: 'array', prefixItems: [{ type: 'string' }, { type: 'boolean' }], minItems: 2 }, ['mock', false]],
    [{ type: 'object', properties: { a: { type: 'string' }, b: { type: 'integer' } }, required: ['b'] }, { b: 0 }],
    [{ allOf: [{ properties: { a: { type: 'string' } }, required: ['a'] }, { properties: { b: { const: true } }, required: ['b'] }] }, { a: 'mock', b: true }],
    [{ allOf: [{ allOf: [{ properties: { a: { type: 'string' } }, required: ['a'] }] }, { required: ['b'], properties: { b: { type: 'integer' } } }] }, { a: 'mock', b: 0 }],
    [{}, null],
  ])('%j → %j', (schema, expected) => expect(minimalInstance(schema)).toEqual(expected));

  it('follows $defs, and stops a recursive schema at its optional edges', () => {
    const schema = {
      type: 'object',
      properties: { home: { $ref: '#/$defs/Address' }, tree: { $ref: '#/$defs/Node' } },
      required: ['home', 'tree'],
      $defs: { Address: ADDRESS, Node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/Node' } } }, required: ['name', 'children'] } },
    };
    expect(minimalInstance(schema)).toEqual({ home: { city: 'mock', zip: 'mockx' }, tree: { name: 'mock', children: [] } });
  });

  it('is valid against zod schemas, converted with $defs for reused parts', () => {
    const Address = z.object({ city: z.string(), zip: z.string().min(5) });
    const schemas = [
      z.object({ home: Address, work: Address.nullable(), tags: z.array(z.enum(['a', 'b'])).min(2), kind: z.literal('x'), n: z.number().int().min(3), when: z.iso.datetime() }),
      z.object({ id: z.uuid(), email: z.email(), score: z.number().gt(1).lte(10), level: z.enum(['low', 'high']).optional(), nested: z.object({ deep: z.array(Address).min(1) }) }),
      z.discriminatedUnion('kind', [z.object({ kind: z.literal('a'), a: z.string() }), z.object({ kind: z.literal('b'), b: z.number() })]),
    ];
    for (const s of schemas) {
      const json = z.toJSONSchema(s, { reused: 'ref' }) as Record<string, unknown>;
      expect(() => s.parse(minimalInstance(json))).not.toThrow();
    }
  });
});
