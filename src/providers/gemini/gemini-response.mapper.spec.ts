import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { thrownBy } from '../../../test/support/kit';
import type { StreamEvent } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { readSse } from '../sse/sse-reader';
import blocked from './fixtures/blocked-prompt-response.json';
import batchEmbed from './fixtures/batch-embed-contents-response.json';
import apiKeyInvalid from './fixtures/error-api-key-invalid.json';
import arrayError from './fixtures/error-array-form.json';
import quota from './fixtures/error-quota.json';
import whole from './fixtures/generate-content-response.json';
import { fromEmbedResponses, fromGenerateContentResponse, GeminiStreamMapper, mapFinishReason, toStatusError, toUsage } from './gemini-response.mapper';
import { thoughtSignatureOf } from './gemini-tool-call-id';
import type { GeminiGenerateContentResponse } from './gemini.wire';

const fixture = (name: string) => readFileSync(join(__dirname, 'fixtures', name), 'utf8');

const thrown = (fn: () => unknown): UpstreamError => thrownBy(fn, UpstreamError);

async function* bytes(text: string, every = 7): AsyncGenerator<Buffer> {
  const buf = Buffer.from(text, 'utf8');
  for (let i = 0; i < buf.length; i += every) yield buf.subarray(i, i + every);
}

async function mapStream(sse: string): Promise<StreamEvent[]> {
  const m = new GeminiStreamMapper();
  const out: StreamEvent[] = [];
  for await (const e of readSse(bytes(sse))) out.push(...m.push(JSON.parse(e.data) as GeminiGenerateContentResponse));
  out.push(...m.end());
  return out;
}

describe('gemini response mapping', () => {
  it('maps the recorded response: answer without thoughts, thoughts as reasoning, functionCall as a tool call', () => {
    const r = fromGenerateContentResponse(whole as GeminiGenerateContentResponse);
    expect(r.choices).toHaveLength(1);
    const [c] = r.choices;
    expect(c).toMatchObject({
      index: 0,
      finish_reason: 'tool_calls',
      message: {
        role: 'assistant',
        content: 'It is 21°C in Paris.',
        reasoning_content: '**Considering the request**\n…',
        tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
    });
    expect(thoughtSignatureOf(c.message.tool_calls![0].id)).toBe('CiQB…');
    expect(r.usage).toEqual({ prompt_tokens: 12, completion_tokens: 158, total_tokens: 170, reasoning_tokens: 150 });
  });

  it('synthesises a distinct id per tool call and sends null content when the model only called tools', () => {
    const r = fromGenerateContentResponse({
      candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'a', args: {} } }, { functionCall: { name: 'b' } }] }, finishReason: 'STOP' }],
    });
    const calls = r.choices[0].message.tool_calls!;
    expect(r.choices[0].message.content).toBeNull();
    expect(calls.map((t) => t.function)).toEqual([{ name: 'a', arguments: '{}' }, { name: 'b', arguments: '{}' }]);
    expect(calls[0].id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(calls[0].id).not.toBe(calls[1].id);
  });

  it('maps several candidates to choices by their index', () => {
    const r = fromGenerateContentResponse({
      candidates: [
        { content: { parts: [{ text: 'one' }] }, finishReason: 'STOP', index: 0 },
        { content: { parts: [{ text: 'two' }] }, finishReason: 'MAX_TOKENS', index: 1 },
      ],
    });
    expect(r.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([[0, 'one', 'stop'], [1, 'two', 'length']]);
  });

  it.each([
    ['STOP', false, 'stop'],
    ['STOP', true, 'tool_calls'],
    [undefined, true, 'tool_calls'],
    ['MAX_TOKENS', false, 'length'],
    ['MAX_TOKENS', true, 'length'],
    ['SAFETY', false, 'content_filter'],
    ['SAFETY', true, 'content_filter'],
    ['RECITATION', false, 'content_filter'],
    ['BLOCKLIST', false, 'content_filter'],
    ['PROHIBITED_CONTENT', false, 'content_filter'],
    ['SPII', false, 'content_filter'],
    ['IMAGE_SAFETY', false, 'content_filter'],
    ['OTHER', false, 'stop'],
    ['FINISH_REASON_UNSPECIFIED', false, 'stop'],
    ['MALFORMED_FUNCTION_CALL', false, 'stop'],
    ['SOMETHING_NEW', false, 'stop'],
  ] as const)('finishReason %s (tool call: %s) → %s', (reason, tools, expected) => {
    expect(mapFinishReason(reason, tools)).toBe(expected);
  });

  it('usage: thoughts are added to completion tokens and reported as reasoning tokens; total = prompt + completion', () => {
    expect(toUsage({ promptTokenCount: 12, candidatesTokenCount: 6, thoughtsTokenCount: 40, totalTokenCount: 58 })).toEqual({
      prompt_tokens: 12, completion_tokens: 46, total_tokens: 58, reasoning_tokens: 40,
    });
    expect(toUsage({ promptTokenCount: 5, candidatesTokenCount: 3, toolUsePromptTokenCount: 9, totalTokenCount: 17 })).toEqual({
      prompt_tokens: 5, completion_tokens: 3, total_tokens: 8,
    });
    expect(toUsage({ promptTokenCount: 5 })).toEqual({ prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 });
    expect(toUsage(undefined)).toBeUndefined();
  });

  it('a blocked prompt (promptFeedback, no candidates) is a content_filter choice with empty content', () => {
    expect(fromGenerateContentResponse(blocked as GeminiGenerateContentResponse)).toEqual({
      choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'content_filter' }],
      usage: { prompt_tokens: 7, completion_tokens: 0, total_tokens: 7 },
    });
  });

  it('no candidates and no block reason is a protocol error; an error object in a 200 body is a status error', () => {
    expect(thrown(() => fromGenerateContentResponse({ usageMetadata: { promptTokenCount: 1 } })).kind).toBe('protocol');
    const e = thrown(() => fromGenerateContentResponse({ error: { code: 503, status: 'UNAVAILABLE', message: 'overloaded' } }));
    expect([e.kind, e.status, e.opts.code]).toEqual(['status', 503, 'UNAVAILABLE']);
  });

  describe('errors before the stream', () => {
    it('an invalid API key (400 API_KEY_INVALID) is reported as 401; the provider message stays in detail', () => {
      const e = toStatusError(400, JSON.stringify(apiKeyInvalid), undefined);
      expect([e.kind, e.status, e.opts.code]).toEqual(['status', 401, 'INVALID_ARGUMENT']);
      expect(e.detail).toContain('API_KEY_INVALID');
      expect(e.detail).toContain('API key not valid');
    });

    it('the array form is read like the object form', () => {
      const e = toStatusError(400, JSON.stringify(arrayError), undefined);
      expect([e.status, e.opts.code]).toEqual([400, 'INVALID_ARGUMENT']);
      expect(e.detail).toContain('Function calling with a response mime type');
    });

    it('retry-after comes from the header, else from RetryInfo.retryDelay', () => {
      const text = JSON.stringify(quota);
      expect(toStatusError(429, text, undefined)).toMatchObject({ status: 429, retryAfterMs: 31_000, opts: { code: 'RESOURCE_EXHAUSTED' } });
      expect(toStatusError(429, text, 5_000).retryAfterMs).toBe(5_000);
      expect(toStatusError(429, JSON.stringify({ error: { code: 429, status: 'RESOURCE_EXHAUSTED', details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '1.5s' }] } }), undefined).retryAfterMs).toBe(1_500);
    });

    it('a body that is not Google JSON keeps the HTTP status', () => {
      const e = toStatusError(502, '<html>Bad Gateway</html>', undefined);
      expect([e.kind, e.status, e.opts.code]).toEqual(['status', 502, undefined]);
      expect(e.detail).toContain('Bad Gateway');
    });
  });

  describe('streaming', () => {
    const recorded = fixture('stream-with-thoughts.sse');

    it.each([
      ['LF', recorded],
      ['CRLF', recorded.replace(/\n/g, '\r\n')],
    ])('maps the recorded stream (%s): reasoning and content deltas, one finish, usage from the last fragment', async (_l, sse) => {
      expect(await mapStream(sse)).toEqual([
        { type: 'delta', index: 0, reasoning: 'Thinking about weather…' },
        { type: 'delta', index: 0, content: 'It is ' },
        { type: 'delta', index: 0, content: '21°C.' },
        { type: 'finish', index: 0, finish_reason: 'stop' },
        { type: 'usage', usage: { prompt_tokens: 12, completion_tokens: 46, total_tokens: 58, reasoning_tokens: 40 } },
      ]);
    });

    it('a functionCall part is one tool-call delta with the whole arguments, and STOP becomes tool_calls', () => {
      const m = new GeminiStreamMapper();
      const events = m.push({
        candidates: [
          { content: { role: 'model', parts: [{ functionCall: { name: 'lookup', args: { q: 'x' } }, thoughtSignature: 'c2ln' }, { functionCall: { name: 'more', args: {} } }] }, finishReason: 'STOP', index: 0 },
        ],
      });
      expect(events).toEqual([
        { type: 'delta', index: 0, tool_calls: [{ index: 0, id: expect.stringMatching(/^call_[0-9a-f]{24}__ts_0c2ln$/), type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }] },
        { type: 'delta', index: 0, tool_calls: [{ index: 1, id: expect.stringMatching(/^call_[0-9a-f]{24}$/), type: 'function', function: { name: 'more', arguments: '{}' } }] },
        { type: 'finish', index: 0, finish_reason: 'tool_calls' },
      ]);
      expect(m.end()).toEqual([]);
    });

    it('a blocked prompt ends the stream with a content_filter finish', () => {
      const m = new GeminiStreamMapper();
      expect(m.push(blocked as GeminiGenerateContentResponse)).toEqual([{ type: 'finish', index: 0, finish_reason: 'content_filter' }]);
      expect(m.end()).toEqual([{ type: 'usage', usage: { prompt_tokens: 7, completion_tokens: 0, total_tokens: 7 } }]);
    });

    it('skips empty text parts and finishes each candidate once', () => {
      const m = new GeminiStreamMapper();
      expect(m.push({ candidates: [{ content: { parts: [{ text: '' }] }, finishReason: 'STOP' }] })).toEqual([{ type: 'finish', index: 0, finish_reason: 'stop' }]);
      expect(m.push({ candidates: [{ content: { parts: [] }, finishReason: 'STOP' }] })).toEqual([]);
    });

    it('a stream that ends before a finishReason is a protocol error, also when one of several candidates is open', () => {
      const m = new GeminiStreamMapper();
      m.push({ candidates: [{ content: { parts: [{ text: 'cut' }] } }] });
      expect(thrown(() => m.end()).kind).toBe('protocol');
      expect(thrown(() => new GeminiStreamMapper().end()).kind).toBe('protocol');
      const two = new GeminiStreamMapper();
      two.push({ candidates: [{ content: { parts: [{ text: 'a' }] }, finishReason: 'STOP', index: 0 }, { content: { parts: [{ text: 'b' }] }, index: 1 }] });
      expect(thrown(() => two.end()).detail).toContain('candidates 1');
    });

    it('an error object mid-stream is an UpstreamError with its code', () => {
      const m = new GeminiStreamMapper();
      m.push({ candidates: [{ content: { parts: [{ text: 'partial' }] } }] });
      const e = thrown(() => m.push({ error: { code: 500, message: 'An internal error has occurred.', status: 'INTERNAL' } }));
      expect([e.kind, e.status, e.opts.code]).toEqual(['status', 500, 'INTERNAL']);
    });

    it('usage is taken from the last fragment that carried it', () => {
      const m = new GeminiStreamMapper();
      m.push({ candidates: [{ content: { parts: [{ text: 'a' }] } }], usageMetadata: { promptTokenCount: 3, totalTokenCount: 3 } });
      m.push({ candidates: [{ content: { parts: [{ text: 'b' }] } }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, totalTokenCount: 5 } });
      m.push({ candidates: [{ content: { parts: [] }, finishReason: 'STOP' }] });
      expect(m.end()).toEqual([{ type: 'usage', usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }]);
    });
  });

  describe('embeddings', () => {
    it('keeps input order, renormalises truncated vectors, and estimates usage', () => {
      const r = fromEmbedResponses(['first', 'second input'], batchEmbed, true);
      const expected = [[0.6, 0.8, 0], [0, 0.6, 0.8]];
      expect(r.embeddings).toHaveLength(2);
      r.embeddings.forEach((v, i) => v.forEach((x, j) => expect(x).toBeCloseTo(expected[i][j], 12)));
      expect(r.usage).toEqual({ prompt_tokens: 2 + 3, total_tokens: 5 });
    });

    it('leaves full-size vectors as Google sent them', () => {
      expect(fromEmbedResponses(['a', 'b'], batchEmbed, false).embeddings).toEqual([[0.6, 0.8, 0], [0, 3, 4]]);
      expect(fromEmbedResponses(['a'], { embedding: { values: [1, 2] } }, false).embeddings).toEqual([[1, 2]]);
    });

    it('a count mismatch or a missing vector is a protocol error; an error body is a status error', () => {
      expect(thrown(() => fromEmbedResponses(['a', 'b', 'c'], batchEmbed, false)).kind).toBe('protocol');
      expect(thrown(() => fromEmbedResponses(['a'], {}, false)).kind).toBe('protocol');
      expect(thrown(() => fromEmbedResponses(['a'], { error: { code: 400, status: 'INVALID_ARGUMENT' } }, false)).status).toBe(400);
    });
  });
});
