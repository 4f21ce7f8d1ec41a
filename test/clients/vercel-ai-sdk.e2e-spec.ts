import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, CITIES, ClientGateway, EMBED_MODEL, EMBED_UPSTREAMS, expectEmbedding, expectStructuredRequest, expectToolRoundTrip, expectTranslatedChat,
  expectTranslatedEmbeddings, Person, PERSON_SCHEMA_NAME, startClientGateway, TOOL_UPSTREAMS, UPSTREAMS, WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswer,
  willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai`) pointed at the gateway with `createOpenAI({ baseURL,
 * apiKey })`, on Chat Completions (`.chat('…')`) and embeddings (`.embedding('…')`); the default
 * model factory (`openai('…')`), which speaks the Responses API, is driven in
 * vercel-ai-sdk-responses.e2e-spec.ts.
 *
 * Both packages ship ESM only; this CommonJS spec loads them with `await import()` (see
 * jest.config.js), which also gives their exact types.
 */
const load = async () => ({ ...(await import('ai')), ...(await import('@ai-sdk/openai')) });
let sdk: Awaited<ReturnType<typeof load>>;
let g: ClientGateway;
let gateway: ReturnType<typeof sdk.createOpenAI>;

beforeAll(async () => {
  [sdk, g] = await Promise.all([load(), startClientGateway()]);
  gateway = sdk.createOpenAI({ baseURL: g.baseURL, apiKey: API_KEY });
});
afterEach(() => g.reset());
afterAll(() => g.close());

const SYSTEM = 'Be brief.';
const PROMPT = 'Say hello to the gateway.';

describe.each(UPSTREAMS)('via %s', (name) => {
  const model = CHAT_MODEL[name];

  it('generateText: the text, finish reason, usage, served model and Gateway-* headers', async () => {
    const want = willAnswer(g, name, `Hello from ${name}, through the gateway.`, PROMPT);
    const r = await sdk.generateText({ model: gateway.chat(model), system: SYSTEM, prompt: PROMPT, maxOutputTokens: 64, maxRetries: 0 });
    expect(r.text).toBe(want);
    expect(r.finishReason).toBe('stop');
    expect(r.usage.totalTokens).toBe(r.usage.inputTokens! + r.usage.outputTokens!);
    if (name !== 'mock') expect([r.usage.inputTokens, r.usage.outputTokens]).toEqual([11, 7]);
    expect(r.response.modelId).toBe(model);
    expect(r.response.headers?.['gateway-provider']).toBe(name);
    expect(r.response.headers?.['gateway-model']).toBe(model);
    const sent = expectTranslatedChat(g, name, { system: SYSTEM, user: PROMPT, stream: false });
    if (name === 'anthropic') expect(sent!.body.max_tokens).toBe(64);
    if (name === 'gemini') expect(sent!.body.generationConfig).toMatchObject({ maxOutputTokens: 64 });
  });

  it('streamText: the text stream adds up to the answer; usage and finish reason at the end', async () => {
    const want = willAnswer(g, name, `Streamed hello from ${name}: one two three.`, PROMPT);
    const result = sdk.streamText({ model: gateway.chat(model), system: SYSTEM, prompt: PROMPT, maxRetries: 0 });
    const parts: string[] = [];
    for await (const t of result.textStream) parts.push(t);
    expect(parts.join('')).toBe(want);
    expect(parts.length).toBeGreaterThan(3);
    expect(await result.finishReason).toBe('stop');
    const usage = await result.usage;
    expect(usage.totalTokens).toBe(usage.inputTokens! + usage.outputTokens!);
    if (name !== 'mock') expect([usage.inputTokens, usage.outputTokens]).toEqual([11, 7]);
    expect((await result.response).headers?.['gateway-provider']).toBe(name);
    const sent = expectTranslatedChat(g, name, { system: SYSTEM, user: PROMPT, stream: true });
    // The AI SDK asks for the usage chunk; the gateway answers it for every family.
    if (name === 'openai') expect(sent!.body.stream_options).toEqual({ include_usage: true });
  });
});

describe.each(TOOL_UPSTREAMS)('tools via %s', (name) => {
  const model = CHAT_MODEL[name];
  const prompt = 'What is the weather in Paris?';

  it('generateText with a zod tool and stopWhen: the call, its execution, the result sent back, the answer', async () => {
    const want = willCallWeather(g, name);
    const calls: unknown[] = [];
    const r = await sdk.generateText({
      model: gateway.chat(model),
      prompt,
      maxRetries: 0,
      tools: {
        [WEATHER_TOOL.name]: sdk.tool({
          description: WEATHER_TOOL.description,
          inputSchema: z.object({ city: z.enum(CITIES) }),
          execute: async (input) => {
            calls.push(input);
            return WEATHER_RESULT;
          },
        }),
      },
      stopWhen: sdk.stepCountIs(3),
    });
    expect(calls).toEqual([WEATHER_ARGS]);
    expect(r.steps).toHaveLength(2);
    expect(r.steps[0].finishReason).toBe('tool-calls');
    expect(r.steps[0].toolCalls.map((c) => [c.toolName, c.input])).toEqual([[WEATHER_TOOL.name, WEATHER_ARGS]]);
    expect(r.steps[0].toolResults.map((t) => t.output)).toEqual([WEATHER_RESULT]);
    expect(r.text).toBe(want);
    expect(r.finishReason).toBe('stop');
    expectToolRoundTrip(g, name);
  });

  it('streamText with a jsonSchema tool: the same round trip over streams', async () => {
    const want = willCallWeather(g, name);
    const result = sdk.streamText({
      model: gateway.chat(model),
      prompt,
      maxRetries: 0,
      tools: {
        [WEATHER_TOOL.name]: sdk.tool({
          description: WEATHER_TOOL.description,
          inputSchema: sdk.jsonSchema<{ city: string }>({
            ...WEATHER_TOOL.parameters,
            properties: { city: { type: 'string', enum: [...CITIES] } },
            required: [...WEATHER_TOOL.parameters.required],
          }),
          execute: async ({ city }) => (city === WEATHER_ARGS.city ? WEATHER_RESULT : 'unknown city'),
        }),
      },
      stopWhen: sdk.stepCountIs(3),
    });
    let text = '';
    const toolCalls: Array<[string, unknown]> = [];
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'tool-call') toolCalls.push([part.toolName, part.input]);
    }
    expect(toolCalls).toEqual([[WEATHER_TOOL.name, WEATHER_ARGS]]);
    expect(text).toBe(want);
    expect(await result.finishReason).toBe('stop');
    expectToolRoundTrip(g, name);
  });
});

describe.each(UPSTREAMS)('structured outputs via %s', (name) => {
  const model = CHAT_MODEL[name];
  const prompt = 'Who wrote the first program?';

  it('generateObject with a zod schema: response_format json_schema, the validated object', async () => {
    const want = willAnswerPerson(g, name);
    const r = await sdk.generateObject({ model: gateway.chat(model), schema: Person, schemaName: PERSON_SCHEMA_NAME, prompt, maxRetries: 0 });
    expect(r.object).toEqual(want);
    expect(r.finishReason).toBe('stop');
    expect(r.response.headers?.['gateway-provider']).toBe(name);
    expectStructuredRequest(g, name);
  });

  it('streamObject: partial objects while the stream lasts, the validated object at its end', async () => {
    const want = willAnswerPerson(g, name);
    const result = sdk.streamObject({ model: gateway.chat(model), schema: Person, schemaName: PERSON_SCHEMA_NAME, prompt, maxRetries: 0 });
    const partials: unknown[] = [];
    for await (const p of result.partialObjectStream) partials.push(p);
    expect(partials.length).toBeGreaterThan(0);
    expect(partials[partials.length - 1]).toEqual(want);
    expect(await result.object).toEqual(want);
    expectStructuredRequest(g, name);
    if (name === 'gemini') expect(g.gemini.requests[0].path).toContain(':streamGenerateContent');
    else if (name !== 'mock') expect(g.fake(name).requests[0].body.stream).toBe(true);
  });

  it('generateText with Output.object: the same through the text call', async () => {
    const want = willAnswerPerson(g, name);
    const r = await sdk.generateText({ model: gateway.chat(model), output: sdk.Output.object({ schema: Person, name: PERSON_SCHEMA_NAME }), prompt, maxRetries: 0 });
    expect(r.output).toEqual(want);
    expectStructuredRequest(g, name);
  });
});

describe.each(EMBED_UPSTREAMS)('embeddings via %s', (name) => {
  const { model } = EMBED_MODEL[name];

  it('embedMany: one vector per value, in order, with usage and the Gateway-* headers', async () => {
    const values = ['the first text', 'a second, different text', 'a third'];
    const r = await sdk.embedMany({ model: gateway.embedding(model), values, maxRetries: 0 });
    expect(r.values).toEqual(values);
    expect(r.embeddings).toHaveLength(3);
    r.embeddings.forEach((v, i) => expectEmbedding(name, values[i], v));
    expect(r.usage.tokens).toBeGreaterThan(0);
    expect(r.responses?.[0]?.headers?.['gateway-provider']).toBe(name);
    expectTranslatedEmbeddings(g, name, values);
  });

  it('embed: one value', async () => {
    const r = await sdk.embed({ model: gateway.embedding(model), value: 'one text', maxRetries: 0 });
    expectEmbedding(name, 'one text', r.embedding);
    expectTranslatedEmbeddings(g, name, ['one text']);
  });
});
