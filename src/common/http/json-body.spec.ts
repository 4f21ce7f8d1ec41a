import { GatewayError } from '../errors/gateway-error';
import { MAX_JSON_DEPTH, parseJsonSafely } from './json-body';

const codeOf = (text: string) => {
  try {
    parseJsonSafely(text, 'invalid_body');
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return [(err as GatewayError).code, (err as GatewayError).message];
  }
  return null;
};

describe('parseJsonSafely', () => {
  it('parses ordinary JSON', () => {
    expect(parseJsonSafely('{"a":[1,{"b":null}]}', 'invalid_body')).toEqual({ a: [1, { b: null }] });
  });
  it('refuses malformed JSON', () => {
    expect(codeOf('{"a":')).toEqual(['invalid_body', 'The request body is not valid JSON.']);
    expect(codeOf('')).toEqual(['invalid_body', 'The request body is not valid JSON.']);
  });
  it('accepts exactly 64 levels and refuses 65', () => {
    const nest = (n: number) => '['.repeat(n) + ']'.repeat(n);
    expect(codeOf(nest(MAX_JSON_DEPTH))).toBeNull();
    expect(codeOf(nest(MAX_JSON_DEPTH + 1))).toEqual(['invalid_body', 'The request body is nested deeper than 64 levels.']);
    expect(codeOf(`{"a":${nest(100_000)}}`)![0]).toBe('invalid_body');
  });
  it('refuses __proto__ and constructor keys at any depth', () => {
    expect(codeOf('{"__proto__":{"x":1}}')).toEqual(['invalid_body', 'The key "__proto__" is not allowed in a request body.']);
    expect(codeOf('{"a":[{"constructor":{"prototype":1}}]}')![1]).toContain('"constructor"');
  });
});
