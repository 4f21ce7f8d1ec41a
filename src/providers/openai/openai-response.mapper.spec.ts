import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UpstreamError } from '../upstream-error';
import { fromWireChunk, fromWireEmbeddings, fromWireResponse, inBandError, mapFinishReason, parseErrorBody, statusError } from './openai-response.mapper';
import type { WireChunk } from './openai.wire';
import { VARIANTS } from './variants';

const fixture = (name: string) => readFileSync(join(__dirname, 'fixtures', name), 'utf8');
const json = (name: string) => JSON.parse(fixture(name));
/** The `data` payloads of a recorded SSE fixture (one line each there), `[DONE]` left out. */
const chunksOf = (name: string): WireChunk[] =>
  fixture(name)
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));

describe('mapFinishReason', () => {
  it.each([
    ['openai', 'stop', 'stop'], ['openai', 'length', 'length'], ['openai', 'tool_calls', 'tool_calls'], ['openai', 'content_filter', 'content_filter'],
    ['openai', 'function_call', 'tool_calls'], ['openai', null, 'stop'], ['openai', 'something_new', 'stop'],
    ['together', 'eos', 'stop'], ['mistral', 'model_length', 'length'], ['mistral', 'error', 'error'],
    ['deepseek', 'insufficient_system_resource', 'stop'], ['openrouter', 'error', 'error'],
  ] as const)('%s: %s → %s', (family, raw, mapped) => {
    expect(mapFinishReason(raw, VARIANTS[family])).toBe(mapped);
  });
});

describe('fromWireResponse', () => {
  it('openai: content, tool calls, usage with reasoning tokens', () => {
    expect(fromWireResponse(json('openai-chat.json'), VARIANTS.openai)).toEqual({
      choices: [{
        index: 0,
        message: { role: 'assistant', content: 'Hello!', tool_calls: [{ id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        finish_reason: 'stop',
      }],
      usage: { prompt_tokens: 19, completion_tokens: 120, total_tokens: 139, reasoning_tokens: 64 },
    });
  });

  it('groq: timing from usage, reasoning from message.reasoning', () => {
    const r = fromWireResponse(json('groq-chat.json'), VARIANTS.groq);
    expect(r.timing).toEqual({ queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 });
    expect(r.usage).toEqual({ prompt_tokens: 20, completion_tokens: 40, total_tokens: 60, reasoning_tokens: 31 });
    expect(r.choices[0].message.reasoning_content).toBe('The user asks for the capital of France.');
  });

  it('groq: usage and timing only in x_groq.usage', () => {
    const r = fromWireResponse({ choices: [{ message: { content: 'x' }, finish_reason: 'stop' }], x_groq: { id: 'r', usage: { prompt_tokens: 1, completion_tokens: 2, queue_time: 0.5 } } }, VARIANTS.groq);
    expect(r.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
    expect(r.timing).toEqual({ queue_time: 0.5 });
  });

  it('deepseek: blank lines before the JSON, reasoning_content, insufficient_system_resource → stop', () => {
    const r = fromWireResponse(JSON.parse(fixture('deepseek-chat-reasoner.json')), VARIANTS.deepseek);
    expect(r.choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: '9.11 is smaller.', reasoning_content: 'Compare 9.11 and 9.8: 0.11 < 0.8.' }, finish_reason: 'stop' });
    expect(r.usage?.reasoning_tokens).toBe(70);
  });

  it('vllm: reasoning under the new name, empty tool_calls ignored, no timing', () => {
    const r = fromWireResponse(json('vllm-chat-reasoning.json'), VARIANTS.vllm);
    expect(r).toEqual({
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi!', reasoning_content: 'Short answer needed.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 15, total_tokens: 25 },
    });
  });

  it('mistral: content array with thinking chunks, model_length → length', () => {
    const r = fromWireResponse(json('mistral-chat-magistral.json'), VARIANTS.mistral);
    expect(r.choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: '4', reasoning_content: 'Two plus two.' }, finish_reason: 'length' });
  });

  it('together: eos → stop', () => {
    expect(fromWireResponse(json('together-chat-eos.json'), VARIANTS.together).choices[0].finish_reason).toBe('stop');
  });

  it('orders choices by index and stringifies object arguments', () => {
    const r = fromWireResponse(
      {
        choices: [
          { index: 1, message: { content: 'b' }, finish_reason: 'stop' },
          { index: 0, message: { content: null, tool_calls: [{ function: { name: 'f', arguments: { a: 1 } } }] }, finish_reason: 'tool_calls' },
        ],
      },
      VARIANTS.ollama,
    );
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.choices[0].message.tool_calls).toEqual([{ id: 'call_0', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }]);
    expect(r.usage).toBeUndefined();
  });

  it('an error in a 200 body, a finish_reason "error", or no choices are errors', () => {
    expect(() => fromWireResponse({ error: { code: 502, message: 'Provider returned error' } }, VARIANTS.openrouter)).toThrow(
      expect.objectContaining({ kind: 'status', opts: expect.objectContaining({ status: 502 }) }),
    );
    expect(() => fromWireResponse({ choices: [{ message: { content: '' }, finish_reason: 'error' }] }, VARIANTS.mistral)).toThrow(expect.objectContaining({ kind: 'protocol' }));
    expect(() => fromWireResponse({ id: 'x' }, VARIANTS.openai)).toThrow(expect.objectContaining({ kind: 'protocol' }));
  });
});

describe('error bodies', () => {
  it.each([
    ['openai-error-max-tokens.json', { message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", type: 'invalid_request_error', code: 'unsupported_parameter' }],
    ['azure-error-content-filter.json', { type: undefined, code: 'content_filter', status: 400 }],
    ['mistral-error.json', { message: 'Tool call id was call_abc123 but must be a-z, A-Z, 0-9, with a length of 9.', type: 'invalid_request_message_error', code: '3230' }],
    ['together-error-string.json', { message: 'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193' }],
    ['together-error-message-type.json', { type: 'invalid_request_error' }],
    ['groq-error-stream-options.json', { message: "property 'stream_options' is unsupported, did you mean 'stream'?", type: 'invalid_request_error', code: undefined }],
    ['vllm-error-legacy.json', { message: 'The model `nope` does not exist.', type: 'NotFoundError', status: 404 }],
  ])('%s', (name, expected) => {
    expect(parseErrorBody(fixture(name))).toMatchObject(expected);
  });

  it('{detail} bodies and non-JSON bodies keep their text', () => {
    expect(parseErrorBody('{"detail":"Not Found"}')).toEqual({ message: 'Not Found' });
    expect(parseErrorBody('<html>502 Bad Gateway</html>\n')).toEqual({ message: '<html>502 Bad Gateway</html>' });
    expect(parseErrorBody('')).toEqual({ message: '' });
  });

  it('statusError: kind status with status, retry-after and code; the body only in detail, cut to length', () => {
    const err = statusError(429, JSON.stringify({ error: { message: 'x'.repeat(2000), type: 'tokens', code: 'rate_limit_exceeded' } }), 1500);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.opts).toEqual({ status: 429, retryAfterMs: 1500, code: 'rate_limit_exceeded' });
    expect(err.detail.length).toBeLessThan(700);
    expect(err.detail).toContain('tokens/rate_limit_exceeded');
  });

  it('inBandError: status when the error names an HTTP status, protocol otherwise', () => {
    expect(inBandError({ code: 502, message: 'Provider returned error' })).toMatchObject({ kind: 'status', opts: { status: 502 } });
    expect(inBandError({ message: 'boom', type: 'server_error', code: null })).toMatchObject({ kind: 'protocol' });
    expect(inBandError('overloaded')).toMatchObject({ kind: 'protocol' });
  });
});

describe('fromWireChunk', () => {
  it('openai stream: role chunk and empty content give nothing, usage chunk with choices: [] gives usage only', () => {
    const mapped = chunksOf('openai-stream.sse').map((c) => fromWireChunk(c, VARIANTS.openai));
    expect(mapped.map((m) => m.events)).toEqual([
      [],
      [{ type: 'delta', index: 0, content: 'Hel' }],
      [{ type: 'delta', index: 0, content: 'lo' }],
      [{ type: 'finish', index: 0, finish_reason: 'stop' }],
      [],
    ]);
    expect(mapped.slice(0, 4).every((m) => m.usage === undefined)).toBe(true);
    expect(mapped[4].usage).toEqual({ prompt_tokens: 9, completion_tokens: 2, total_tokens: 11, reasoning_tokens: 0 });
  });

  it('tool-call deltas keep index, id, name and argument fragments', () => {
    const events = chunksOf('openai-stream-tool-call.sse').flatMap((c) => fromWireChunk(c, VARIANTS.openai).events);
    expect(events).toEqual([
      { type: 'delta', index: 0, tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] },
      { type: 'finish', index: 0, finish_reason: 'tool_calls' },
    ]);
  });

  it('groq: usage and timing from x_groq.usage on the finish chunk', () => {
    const last = chunksOf('groq-stream.sse').map((c) => fromWireChunk(c, VARIANTS.groq)).at(-1)!;
    expect(last).toEqual({
      events: [{ type: 'finish', index: 0, finish_reason: 'stop' }],
      usage: { prompt_tokens: 20, completion_tokens: 40, total_tokens: 60 },
      timing: { queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 },
    });
  });

  it("azure: the first chunk's empty choices and prompt_filter_results give nothing", () => {
    const [first, , content] = chunksOf('azure-stream.sse').map((c) => fromWireChunk(c, VARIANTS.azure));
    expect(first).toEqual({ events: [] });
    expect(content.events).toEqual([{ type: 'delta', index: 0, content: 'Hello' }]);
  });

  it('deepseek: reasoning_content deltas, null content tolerated', () => {
    const events = chunksOf('deepseek-stream-keepalive.sse').flatMap((c) => fromWireChunk(c, VARIANTS.deepseek).events);
    expect(events).toEqual([
      { type: 'delta', index: 0, reasoning: 'Think' },
      { type: 'delta', index: 0, content: 'Done' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
    ]);
  });

  it('mistral: a whole tool call in one delta, usage with the finish, model_length → length', () => {
    const mapped = chunksOf('mistral-stream.sse').map((c) => fromWireChunk(c, VARIANTS.mistral));
    expect(mapped[2].events).toEqual([{ type: 'delta', index: 0, tool_calls: [{ index: 0, id: 'D681PevKs', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] }]);
    expect(mapped[3]).toMatchObject({ events: [{ type: 'finish', index: 0, finish_reason: 'length' }], usage: { prompt_tokens: 7, completion_tokens: 12, total_tokens: 19 } });
  });

  it('openrouter: delta.reasoning; a mid-stream error chunk throws a status error', () => {
    const events = chunksOf('openrouter-stream-reasoning.sse').flatMap((c) => fromWireChunk(c, VARIANTS.openrouter).events);
    expect(events[0]).toEqual({ type: 'delta', index: 0, reasoning: 'Hmm, ' });
    const [ok, failing] = chunksOf('openrouter-stream-error.sse');
    expect(fromWireChunk(ok, VARIANTS.openrouter).events).toEqual([{ type: 'delta', index: 0, content: 'Partial' }]);
    expect(() => fromWireChunk(failing, VARIANTS.openrouter)).toThrow(expect.objectContaining({ kind: 'status', opts: expect.objectContaining({ status: 502 }) }));
  });

  it('a finish_reason "error" without an error object, and groq x_groq.error, throw', () => {
    expect(() => fromWireChunk({ choices: [{ index: 0, delta: {}, finish_reason: 'error' }] }, VARIANTS.mistral)).toThrow(UpstreamError);
    expect(() => fromWireChunk({ choices: [], x_groq: { id: 'r', error: 'stopped' } }, VARIANTS.groq)).toThrow(UpstreamError);
  });

  it('a chunk that is not an object is a protocol error', () => {
    expect(() => fromWireChunk(null as unknown as WireChunk, VARIANTS.openai)).toThrow(expect.objectContaining({ kind: 'protocol' }));
  });
});

describe('fromWireEmbeddings', () => {
  it('returns vectors in input order by index', () => {
    expect(fromWireEmbeddings(json('embeddings-unordered.json'), 2)).toEqual({
      embeddings: [[0.0123, -0.0456], [0.5, -0.5]],
      usage: { prompt_tokens: 5, total_tokens: 5 },
    });
  });

  it('decodes base64 little-endian float32 if an upstream sends it anyway', () => {
    const buf = Buffer.alloc(8);
    buf.writeFloatLE(0.25, 0);
    buf.writeFloatLE(-1.5, 4);
    expect(fromWireEmbeddings({ data: [{ index: 0, embedding: buf.toString('base64') }] }, 1).embeddings).toEqual([[0.25, -1.5]]);
  });

  it('a missing vector is a protocol error', () => {
    expect(() => fromWireEmbeddings({ data: [{ index: 1, embedding: [1] }] }, 2)).toThrow(expect.objectContaining({ kind: 'protocol' }));
    expect(() => fromWireEmbeddings({} as never, 1)).toThrow(expect.objectContaining({ kind: 'protocol' }));
  });
});
