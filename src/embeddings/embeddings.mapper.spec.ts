import { embeddingsBody, float32Base64, modelNotSupportedBody } from './embeddings.mapper';

/** What OpenAI's SDKs do with a base64 embedding: little-endian float32, read back as numbers. */
function decode(s: string): number[] {
  const buf = Buffer.from(s, 'base64');
  const out: number[] = [];
  for (let i = 0; i < buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

describe('float32Base64', () => {
  it('packs little-endian float32 bytes (1, -2, 0.5 → 00 00 80 3F, 00 00 00 C0, 00 00 00 3F)', () => {
    expect(float32Base64([1, -2, 0.5])).toBe('AACAPwAAAMAAAAA/');
  });

  it('round-trips float32 values exactly and rounds doubles to float32', () => {
    const v = [0.1, -0.3333333333, 1e-8, 123.456, 0];
    expect(decode(float32Base64(v))).toEqual(v.map(Math.fround));
    expect(decode(float32Base64(v.map(Math.fround)))).toEqual(v.map(Math.fround));
  });

  it('encodes an empty vector as an empty string', () => {
    expect(float32Base64([])).toBe('');
  });
});

describe('embeddingsBody', () => {
  const result = { embeddings: [[1, 2], [3, 4], [5, 6]], usage: { prompt_tokens: 7, total_tokens: 7 } };

  it('float: numbers, one entry per input in order, index matching', () => {
    expect(embeddingsBody('embed-small', result, 'float')).toEqual({
      object: 'list',
      data: [
        { object: 'embedding', embedding: [1, 2], index: 0 },
        { object: 'embedding', embedding: [3, 4], index: 1 },
        { object: 'embedding', embedding: [5, 6], index: 2 },
      ],
      model: 'embed-small',
      usage: { prompt_tokens: 7, total_tokens: 7 },
    });
  });

  it('base64: each vector encoded, same order', () => {
    const body = embeddingsBody('embed-small', result, 'base64');
    expect(body.data.map((d) => d.index)).toEqual([0, 1, 2]);
    expect(body.data.map((d) => decode(d.embedding as string))).toEqual(result.embeddings);
  });
});

describe('modelNotSupportedBody', () => {
  it('is the contract body, fields in the contract order', () => {
    expect(JSON.stringify(modelNotSupportedBody('nope'))).toBe(
      '{"error":{"message":"nope","type":"invalid_request_error","code":"model_not_found","param":"model"}}',
    );
  });
});
