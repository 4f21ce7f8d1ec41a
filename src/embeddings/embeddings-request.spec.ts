import { thrownBy } from '../../test/support/kit';
import { GatewayError } from '../common/errors/gateway-error';
import { MAX_DIMENSIONS, MAX_INPUT_BYTES, MAX_INPUTS, parseEmbeddingsBody } from './embeddings-request';

function failure(body: unknown): { code: string; param?: string; message: string } {
  const { code, param, message } = thrownBy(() => parseEmbeddingsBody(body), GatewayError);
  return { code, param, message };
}

const ok = { model: 'embed-small', input: 'hello' };

describe('parseEmbeddingsBody', () => {
  it('takes a single string as one input, float by default', () => {
    expect(parseEmbeddingsBody(ok)).toEqual({ model: 'embed-small', encodingFormat: 'float', request: { input: ['hello'] } });
  });

  it('takes every contract field', () => {
    expect(parseEmbeddingsBody({ model: 'm', input: ['a', 'b'], dimensions: 8, encoding_format: 'base64', user: 'u-1' })).toEqual({
      model: 'm',
      encodingFormat: 'base64',
      request: { input: ['a', 'b'], dimensions: 8, user: 'u-1' },
    });
  });

  it('treats null optional fields as absent', () => {
    expect(parseEmbeddingsBody({ ...ok, dimensions: null, encoding_format: null, user: null })).toEqual(parseEmbeddingsBody(ok));
  });

  it('accepts exactly the caps', () => {
    expect(parseEmbeddingsBody({ ...ok, input: Array.from({ length: MAX_INPUTS }, () => 'x') }).request.input).toHaveLength(MAX_INPUTS);
    expect(parseEmbeddingsBody({ ...ok, input: 'x'.repeat(MAX_INPUT_BYTES) }).request.input[0]).toHaveLength(MAX_INPUT_BYTES);
    expect(parseEmbeddingsBody({ ...ok, dimensions: MAX_DIMENSIONS }).request.dimensions).toBe(MAX_DIMENSIONS);
  });

  it.each<[string, string, unknown]>([
    ['body not an object', 'body', ['x']],
    ['body null', 'body', null],
    ['unknown key', 'temperature', { ...ok, temperature: 1 }],
    ['model missing', 'model', { input: 'x' }],
    ['model not a string', 'model', { ...ok, model: 42 }],
    ['model empty', 'model', { ...ok, model: '' }],
    ['model too long', 'model', { ...ok, model: 'm'.repeat(1025) }],
    ['input missing', 'input', { model: 'm' }],
    ['input a number', 'input', { ...ok, input: 5 }],
    ['input null', 'input', { ...ok, input: null }],
    ['input an object', 'input', { ...ok, input: { text: 'x' } }],
    ['input empty string', 'input', { ...ok, input: '' }],
    ['input empty array', 'input', { ...ok, input: [] }],
    ['input entry not a string', 'input.1', { ...ok, input: ['a', 2] }],
    ['input entry empty', 'input.2', { ...ok, input: ['a', 'b', ''] }],
    ['input token array', 'input.0', { ...ok, input: [1, 2, 3] }],
    ['input nested token arrays', 'input.0', { ...ok, input: [[1, 2]] }],
    ['too many inputs', 'input', { ...ok, input: Array.from({ length: MAX_INPUTS + 1 }, () => 'x') }],
    ['too much text (bytes, not characters)', 'input', { ...ok, input: ['é'.repeat(MAX_INPUT_BYTES / 4), 'é'.repeat(MAX_INPUT_BYTES / 4 + 1)] }],
    ['dimensions zero', 'dimensions', { ...ok, dimensions: 0 }],
    ['dimensions negative', 'dimensions', { ...ok, dimensions: -8 }],
    ['dimensions fractional', 'dimensions', { ...ok, dimensions: 8.5 }],
    ['dimensions a string', 'dimensions', { ...ok, dimensions: '8' }],
    ['dimensions over the cap', 'dimensions', { ...ok, dimensions: MAX_DIMENSIONS + 1 }],
    ['encoding_format unknown', 'encoding_format', { ...ok, encoding_format: 'binary' }],
    ['encoding_format not a string', 'encoding_format', { ...ok, encoding_format: true }],
    ['user not a string', 'user', { ...ok, user: 7 }],
    ['user too long', 'user', { ...ok, user: 'u'.repeat(257) }],
  ])('%s → 400 invalid_request naming %s', (_name, param, body) => {
    const f = failure(body);
    expect(f.code).toBe('invalid_request');
    expect(f.param).toBe(param);
  });
});
