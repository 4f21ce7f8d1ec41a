import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StreamEvent } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { readChatStream } from './openai.stream';
import { OpenAiCompatibleFamily, VARIANTS } from './variants';

const fixture = (name: string) => readFileSync(join(__dirname, 'fixtures', name), 'utf8');

/** A body delivering `text` in pieces of `every` bytes (splitting events and UTF-8 characters). */
async function* body(text: string, every = 7): AsyncGenerator<Buffer> {
  const buf = Buffer.from(text, 'utf8');
  for (let i = 0; i < buf.length; i += every) yield buf.subarray(i, i + every);
}

async function read(text: string, family: OpenAiCompatibleFamily = 'openai', every = 7): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const e of readChatStream(body(text, every), VARIANTS[family])) out.push(e);
  return out;
}

async function failure(text: string, family: OpenAiCompatibleFamily = 'openai'): Promise<UpstreamError> {
  const err = await read(text, family).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UpstreamError);
  return err as UpstreamError;
}

const chunk = (delta: object, finish: string | null = null, extra = {}) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;

describe('readChatStream', () => {
  it.each([1, 3, 7, 4096])('the recorded OpenAI stream, delivered %i bytes at a time', async (every) => {
    expect(await read(fixture('openai-stream.sse'), 'openai', every)).toEqual([
      { type: 'delta', index: 0, content: 'Hel' },
      { type: 'delta', index: 0, content: 'lo' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'usage', usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11, reasoning_tokens: 0 } },
    ]);
  });

  it('groq: usage in x_groq.usage and again in a usage chunk is reported once, with timing', async () => {
    const usages = (await read(fixture('groq-stream-both-usages.sse'), 'groq')).filter((e) => e.type === 'usage');
    expect(usages).toEqual([
      { type: 'usage', usage: { prompt_tokens: 20, completion_tokens: 40, total_tokens: 60 }, timing: { queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 } },
    ]);
  });

  it('groq: the historical placement (x_groq on the finish chunk only)', async () => {
    expect((await read(fixture('groq-stream.sse'), 'groq')).at(-1)).toEqual({
      type: 'usage',
      usage: { prompt_tokens: 20, completion_tokens: 40, total_tokens: 60 },
      timing: { queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 },
    });
  });

  it('azure: the empty first chunk is skipped', async () => {
    const events = await read(fixture('azure-stream.sse'), 'azure');
    expect(events.map((e) => e.type)).toEqual(['delta', 'finish', 'usage']);
  });

  it('deepseek: keep-alive comments before the first event', async () => {
    const events = await read(fixture('deepseek-stream-keepalive.sse'), 'deepseek');
    expect(events).toEqual([
      { type: 'delta', index: 0, reasoning: 'Think' },
      { type: 'delta', index: 0, content: 'Done' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'usage', usage: { prompt_tokens: 5, completion_tokens: 12, total_tokens: 17, reasoning_tokens: 10 } },
    ]);
  });

  it('mistral: usage on the finish chunk', async () => {
    expect((await read(fixture('mistral-stream.sse'), 'mistral')).slice(-2)).toEqual([
      { type: 'finish', index: 0, finish_reason: 'length' },
      { type: 'usage', usage: { prompt_tokens: 7, completion_tokens: 12, total_tokens: 19 } },
    ]);
  });

  it('openrouter: processing comments, reasoning, then a mid-stream error after content', async () => {
    const events: StreamEvent[] = [];
    const err = await (async () => {
      for await (const e of readChatStream(body(fixture('openrouter-stream-error.sse')), VARIANTS.openrouter)) events.push(e);
    })().then(
      () => undefined,
      (e: unknown) => e as UpstreamError,
    );
    expect(events).toEqual([{ type: 'delta', index: 0, content: 'Partial' }]);
    expect(err).toMatchObject({ kind: 'status', opts: { status: 502 } });
    expect((await read(fixture('openrouter-stream-reasoning.sse'), 'openrouter')).filter((e) => e.type === 'usage')).toHaveLength(1);
  });

  it('ignores anything after [DONE]', async () => {
    const events = await read(`${chunk({ content: 'a' }, 'stop')}data: [DONE]\n\n${chunk({ content: 'late' })}`);
    expect(events).toEqual([{ type: 'delta', index: 0, content: 'a' }, { type: 'finish', index: 0, finish_reason: 'stop' }]);
  });

  it('a body ending without [DONE] and without a finish was cut: protocol error', async () => {
    expect((await failure(chunk({ content: 'partial' }))).kind).toBe('protocol');
    expect((await failure('')).kind).toBe('protocol');
  });

  it('a body ending without [DONE] while another choice is unfinished was cut', async () => {
    const two = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'a' } }, { index: 1, delta: { content: 'b' } }] })}\n\n`;
    expect((await failure(`${two}${chunk({}, 'stop')}`)).kind).toBe('protocol');
  });

  it('a body ending after every finish but without [DONE] is accepted, usage still reported', async () => {
    const events = await read(`${chunk({ content: 'a' })}${chunk({}, 'stop', { usage: { prompt_tokens: 1, completion_tokens: 1 } })}`);
    expect(events.map((e) => e.type)).toEqual(['delta', 'finish', 'usage']);
  });

  it('unparseable data is a protocol error, never parsed as a fragment', async () => {
    expect((await failure(`${chunk({ content: 'a' })}data: {"choices":[{"delta":\n\n`)).kind).toBe('protocol');
  });

  it('an in-band {"error":…} event is thrown after the content before it', async () => {
    const events: StreamEvent[] = [];
    const text = `${chunk({ content: 'a' })}data: ${JSON.stringify({ error: { message: 'server had an error', type: 'server_error', param: null, code: null } })}\n\n`;
    const err = await (async () => {
      for await (const e of readChatStream(body(text), VARIANTS.openai)) events.push(e);
    })().then(
      () => undefined,
      (e: unknown) => e as UpstreamError,
    );
    expect(events).toHaveLength(1);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err!.kind).toBe('protocol');
  });

  it('an `event: error` SSE event is an error', async () => {
    expect(await failure(`${chunk({ content: 'a' })}event: error\ndata: {"error":{"message":"overloaded","code":503}}\n\n`)).toMatchObject({ kind: 'status', opts: { status: 503 } });
  });
});
