import OpenAI from 'openai';
import OpenAIv7 from 'openai-v7';
import { zodResponseFormat as zodResponseFormatV7 } from 'openai-v7/helpers/zod';
import { VERSION as V7 } from 'openai-v7/version';
import { zodResponseFormat } from 'openai/helpers/zod';
import { VERSION as V6 } from 'openai/version';
import {
  API_KEY, CHAT_MODEL, ClientGateway, EMBED_MODEL, EMBED_UPSTREAMS, expectEmbedding, expectStructuredRequest, expectToolRoundTrip, expectTranslatedChat,
  expectTranslatedEmbeddings, Person, PERSON_SCHEMA_NAME, startClientGateway, TOOL_UPSTREAMS, UPSTREAMS, WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswer,
  willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * The official `openai` SDK, 6.x and 7.x, used the way its users write code against the gateway (only
 * `baseURL` and `apiKey` changed): models, chat as JSON and as a stream, a tool round trip and
 * embeddings, against the offline mock and fake OpenAI, Anthropic and Gemini upstreams.
 *
 * 7.x has 6.x's API (its major version only raised the Node requirement), so one suite body drives
 * both. It is typed with 6.x's declarations: the two installed copies declare the same class, but
 * their private fields make TypeScript treat them as distinct types.
 */
let g: ClientGateway;
beforeAll(async () => {
  g = await startClientGateway();
});
afterEach(() => g.reset());
afterAll(() => g.close());

/** Each SDK with its own `zodResponseFormat` helper (the helper's parser is checked by the SDK that made it). */
const SDKS: Array<[string, () => OpenAI, typeof zodResponseFormat]> = [
  [`openai ${V6}`, () => new OpenAI({ apiKey: API_KEY, baseURL: g.baseURL, maxRetries: 0 }), zodResponseFormat],
  [`openai ${V7}`, () => new OpenAIv7({ apiKey: API_KEY, baseURL: g.baseURL, maxRetries: 0 }) as unknown as OpenAI, zodResponseFormatV7 as unknown as typeof zodResponseFormat],
];

it('drives the two major versions', () => {
  expect([V6.split('.')[0], V7.split('.')[0]]).toEqual(['6', '7']);
});

const SYSTEM = 'Be brief.';
const USER = 'Say hello to the gateway.';
const messages = [
  { role: 'system' as const, content: SYSTEM },
  { role: 'user' as const, content: USER },
];

describe.each(SDKS)('%s', (_label, make, responseFormat) => {
  let client: OpenAI;
  beforeAll(() => {
    client = make();
  });

  it('models.list() pages through the catalogue; models.retrieve() names the provider', async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual(['auto', 'claude', 'embed-small', 'flash', 'gem-embed', 'gpt', 'mock-embed', 'mock-fast']);
    for (const name of UPSTREAMS) {
      expect(await client.models.retrieve(CHAT_MODEL[name])).toEqual({ id: CHAT_MODEL[name], object: 'model', created: 0, owned_by: name });
    }
    const missing = await client.models.retrieve('no-such-model').catch((e: unknown) => e);
    // Each SDK copy raises its own NotFoundError class.
    expect((missing as Error).constructor.name).toBe('NotFoundError');
    expect(missing).toMatchObject({ status: 404, error: { code: 'model_not_found' } });
  });

  describe.each(UPSTREAMS)('via %s', (name) => {
    const model = CHAT_MODEL[name];

    it('chat.completions.create: the answer, its usage and the Gateway-* headers', async () => {
      const want = willAnswer(g, name, `Hello from ${name}, through the gateway.`, USER);
      const { data, response } = await client.chat.completions.create({ model, messages, max_tokens: 64 }).withResponse();
      expect(data).toMatchObject({ object: 'chat.completion', model, choices: [{ index: 0, message: { role: 'assistant', content: want }, finish_reason: 'stop' }] });
      expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens);
      if (name !== 'mock') expect(data.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 });
      expect(response.headers.get('gateway-provider')).toBe(name);
      expect(response.headers.get('gateway-model')).toBe(model);
      expect(response.headers.get('gateway-fallback-used')).toBe('false');
      const sent = expectTranslatedChat(g, name, { system: SYSTEM, user: USER, stream: false });
      if (name === 'openai') expect(sent!.body.max_completion_tokens).toBe(64);
      if (name === 'anthropic') expect(sent!.body.max_tokens).toBe(64);
      if (name === 'gemini') expect(sent!.body.generationConfig).toMatchObject({ maxOutputTokens: 64 });
    });

    it('stream: chunks add up to the answer, the last one carries the usage (stream_options.include_usage)', async () => {
      const want = willAnswer(g, name, `Streamed hello from ${name}: one two three.`, USER);
      const { data: stream, response } = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } }).withResponse();
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(response.headers.get('gateway-provider')).toBe(name);
      let text = '';
      let chunks = 0;
      let finish: string | null = null;
      const usageChunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
      for await (const c of stream) {
        chunks++;
        expect(c.model).toBe(model);
        text += c.choices[0]?.delta?.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
        if (c.usage) usageChunks.push(c);
      }
      expect(text).toBe(want);
      expect(chunks).toBeGreaterThan(3);
      expect(finish).toBe('stop');
      expect(usageChunks).toHaveLength(1);
      expect(usageChunks[0].choices).toEqual([]);
      const usage = usageChunks[0].usage!;
      expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
      if (name !== 'mock') expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 });
      expectTranslatedChat(g, name, { system: SYSTEM, user: USER, stream: true });
    });
  });

  describe.each(TOOL_UPSTREAMS)('tools via %s', (name) => {
    const model = CHAT_MODEL[name];
    const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [{ type: 'function', function: { ...WEATHER_TOOL, parameters: { ...WEATHER_TOOL.parameters } } }];
    const ask = [{ role: 'user' as const, content: 'What is the weather in Paris?' }];

    it('a tool call, then the tool result sent back, then the answer', async () => {
      const want = willCallWeather(g, name);
      const first = await client.chat.completions.create({ model, messages: ask, tools });
      const choice = first.choices[0];
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content ?? '').toBe('');
      const calls = choice.message.tool_calls ?? [];
      expect(calls).toHaveLength(1);
      const call = calls[0];
      if (call.type !== 'function') throw new Error(`expected a function tool call, got ${call.type}`);
      expect(call.function.name).toBe(WEATHER_TOOL.name);
      expect(JSON.parse(call.function.arguments)).toEqual(WEATHER_ARGS);
      expect(call.id).toMatch(/\S/);

      const second = await client.chat.completions.create({
        model,
        tools,
        messages: [...ask, choice.message, { role: 'tool', tool_call_id: call.id, content: WEATHER_RESULT }],
      });
      expect(second.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: want } });
      expectToolRoundTrip(g, name);
    });

    it('a streamed tool call: the deltas assemble into the name and arguments', async () => {
      willCallWeather(g, name);
      const stream = await client.chat.completions.create({ model, messages: ask, tools, stream: true });
      let fn = '';
      let args = '';
      let id = '';
      let finish: string | null = null;
      for await (const c of stream) {
        for (const tc of c.choices[0]?.delta?.tool_calls ?? []) {
          expect(tc.index).toBe(0);
          id ||= tc.id ?? '';
          fn += tc.function?.name ?? '';
          args += tc.function?.arguments ?? '';
        }
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      expect([fn, JSON.parse(args), finish]).toEqual([WEATHER_TOOL.name, WEATHER_ARGS, 'tool_calls']);
      expect(id).toMatch(/\S/);
      if (name !== 'mock') expect(g.fake(name).requests[0].body.stream === true || g.fake(name).requests[0].path.includes('stream')).toBe(true);
    });
  });

  describe.each(UPSTREAMS)('structured outputs via %s', (name) => {
    it('chat.completions.parse with zodResponseFormat: response_format json_schema, the parsed object', async () => {
      const want = willAnswerPerson(g, name);
      const r = await client.chat.completions.parse({
        model: CHAT_MODEL[name],
        messages: [{ role: 'user', content: 'Who wrote the first program?' }],
        response_format: responseFormat(Person, PERSON_SCHEMA_NAME),
      });
      expect(r.choices[0].message.parsed).toEqual(want);
      expect(JSON.parse(r.choices[0].message.content!)).toEqual(want);
      expect(r.choices[0].finish_reason).toBe('stop');
      expectStructuredRequest(g, name);
    });
  });

  describe.each(EMBED_UPSTREAMS)('embeddings via %s', (name) => {
    const { model } = EMBED_MODEL[name];

    it('embeddings.create with the SDK default (base64): one vector per input, in order', async () => {
      const input = ['the first text', 'a second, different text'];
      const { data, response } = await client.embeddings.create({ model, input }).withResponse();
      expect(data.model).toBe(model);
      expect(data.data.map((d) => d.index)).toEqual([0, 1]);
      data.data.forEach((d, i) => expectEmbedding(name, input[i], d.embedding));
      expect(data.data[0].embedding).not.toEqual(data.data[1].embedding);
      expect(data.usage.prompt_tokens).toBeGreaterThan(0);
      expect(response.headers.get('gateway-provider')).toBe(name);
      expect(response.headers.get('gateway-model')).toBe(model);
      expectTranslatedEmbeddings(g, name, input);
    });

    it('one string input, as floats', async () => {
      const r = await client.embeddings.create({ model, input: 'one text', encoding_format: 'float' });
      expect(r.data).toHaveLength(1);
      expectEmbedding(name, 'one text', r.data[0].embedding);
      expectTranslatedEmbeddings(g, name, ['one text']);
    });
  });
});
