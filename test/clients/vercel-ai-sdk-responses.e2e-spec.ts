import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, CITIES, ClientGateway, expectStructuredRequest, expectToolRoundTrip, expectTranslatedChat, Person, PERSON_SCHEMA_NAME, startClientGateway,
  TOOL_UPSTREAMS, UPSTREAMS, WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswer, willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * The Vercel AI SDK's default OpenAI model, which speaks the Responses API: `createOpenAI({ baseURL,
 * apiKey })('…')` and its explicit form `.responses('…')`, with `generateText`, `streamText`, a tool
 * round trip and `generateObject`, against the offline mock and fake OpenAI, Anthropic and Gemini
 * upstreams. ESM only, loaded with `await import()` as in the chat suite.
 */
const load = async () => ({ ...(await import('ai')), ...(await import('@ai-sdk/openai')) });
let sdk: Awaited<ReturnType<typeof load>>;
let g: ClientGateway;
let gateway: ReturnType<typeof sdk.createOpenAI>;
/** The gateway paths the SDK called, recorded by the fetch it is given, so each test shows it spoke Responses. */
let paths: string[] = [];

beforeAll(async () => {
  [sdk, g] = await Promise.all([load(), startClientGateway()]);
  gateway = sdk.createOpenAI({
    baseURL: g.baseURL,
    apiKey: API_KEY,
    fetch: (url, init) => {
      paths.push(new URL(String(url instanceof Request ? url.url : url)).pathname);
      return fetch(url, init);
    },
  });
});
afterEach(() => {
  g.reset();
  paths = [];
});
afterAll(() => g.close());

const SYSTEM = 'Be brief.';
const PROMPT = 'Say hello to the gateway.';

/** Both ways of taking the Responses model: the provider called as a function (its default) and `.responses`. */
const FACTORIES: Array<[string, (model: string) => ReturnType<typeof gateway.responses>]> = [
  ["gateway('…')", (model) => gateway(model)],
  ["gateway.responses('…')", (model) => gateway.responses(model)],
];

describe.each(FACTORIES)('%s', (_label, responsesModel) => {
  describe.each(UPSTREAMS)('via %s', (name) => {
    const model = CHAT_MODEL[name];

    it('generateText: the text, finish reason, usage, served model and Gateway-* headers over POST /v1/responses', async () => {
      const want = willAnswer(g, name, `Hello from ${name}, through the Responses API.`, PROMPT);
      const r = await sdk.generateText({ model: responsesModel(model), system: SYSTEM, prompt: PROMPT, maxOutputTokens: 64, maxRetries: 0 });
      expect(r.text).toBe(want);
      expect(r.finishReason).toBe('stop');
      expect(r.usage.totalTokens).toBe(r.usage.inputTokens! + r.usage.outputTokens!);
      if (name !== 'mock') expect([r.usage.inputTokens, r.usage.outputTokens]).toEqual([11, 7]);
      expect(r.response.modelId).toBe(model);
      expect(r.response.id).toMatch(/^resp_/);
      expect(r.response.headers?.['gateway-provider']).toBe(name);
      expect(paths).toEqual(['/v1/responses']);
      const sent = expectTranslatedChat(g, name, { system: SYSTEM, user: PROMPT, stream: false });
      if (name === 'anthropic') expect(sent!.body.max_tokens).toBe(64);
      if (name === 'gemini') expect(sent!.body.generationConfig).toMatchObject({ maxOutputTokens: 64 });
    });

    it('streamText: the text stream adds up to the answer; usage and finish reason at the end', async () => {
      const want = willAnswer(g, name, `Streamed hello from ${name}: one two three.`, PROMPT);
      const result = sdk.streamText({ model: responsesModel(model), system: SYSTEM, prompt: PROMPT, maxRetries: 0 });
      const parts: string[] = [];
      for await (const t of result.textStream) parts.push(t);
      expect(parts.join('')).toBe(want);
      expect(parts.length).toBeGreaterThan(1);
      expect(await result.finishReason).toBe('stop');
      const usage = await result.usage;
      expect(usage.totalTokens).toBe(usage.inputTokens! + usage.outputTokens!);
      if (name !== 'mock') expect([usage.inputTokens, usage.outputTokens]).toEqual([11, 7]);
      expect((await result.response).headers?.['gateway-provider']).toBe(name);
      expect(paths).toEqual(['/v1/responses']);
      expectTranslatedChat(g, name, { system: SYSTEM, user: PROMPT, stream: true });
    });
  });
});

describe.each(TOOL_UPSTREAMS)('tools via %s', (name) => {
  const model = CHAT_MODEL[name];
  const prompt = 'What is the weather in Paris?';
  const weatherTools = (calls: unknown[]) => ({
    [WEATHER_TOOL.name]: sdk.tool({
      description: WEATHER_TOOL.description,
      inputSchema: z.object({ city: z.enum(CITIES) }),
      execute: async (input) => {
        calls.push(input);
        return WEATHER_RESULT;
      },
    }),
  });

  it('generateText with a zod tool and stopWhen: function_call, its execution, function_call_output sent back, the answer', async () => {
    const want = willCallWeather(g, name);
    const calls: unknown[] = [];
    const r = await sdk.generateText({ model: gateway(model), prompt, maxRetries: 0, tools: weatherTools(calls), stopWhen: sdk.stepCountIs(3) });
    expect(calls).toEqual([WEATHER_ARGS]);
    expect(r.steps).toHaveLength(2);
    expect(r.steps[0].finishReason).toBe('tool-calls');
    expect(r.steps[0].toolCalls.map((c) => [c.toolName, c.input])).toEqual([[WEATHER_TOOL.name, WEATHER_ARGS]]);
    expect(r.steps[0].toolResults.map((t) => t.output)).toEqual([WEATHER_RESULT]);
    expect(r.text).toBe(want);
    expect(r.finishReason).toBe('stop');
    expect(paths).toEqual(['/v1/responses', '/v1/responses']);
    expectToolRoundTrip(g, name);
  });

  it('streamText: the same round trip over Responses event streams', async () => {
    const want = willCallWeather(g, name);
    const calls: unknown[] = [];
    const result = sdk.streamText({ model: gateway.responses(model), prompt, maxRetries: 0, tools: weatherTools(calls), stopWhen: sdk.stepCountIs(3) });
    let text = '';
    const toolCalls: Array<[string, unknown]> = [];
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'tool-call') toolCalls.push([part.toolName, part.input]);
      if (part.type === 'error') throw part.error;
    }
    expect(toolCalls).toEqual([[WEATHER_TOOL.name, WEATHER_ARGS]]);
    expect(calls).toEqual([WEATHER_ARGS]);
    expect(text).toBe(want);
    expect(await result.finishReason).toBe('stop');
    expect(paths).toEqual(['/v1/responses', '/v1/responses']);
    expectToolRoundTrip(g, name);
  });
});

describe.each(UPSTREAMS)('structured outputs via %s', (name) => {
  it('generateObject with a zod schema: text.format json_schema, the validated object', async () => {
    const want = willAnswerPerson(g, name);
    const r = await sdk.generateObject({ model: gateway(CHAT_MODEL[name]), schema: Person, schemaName: PERSON_SCHEMA_NAME, prompt: 'Who wrote the first program?', maxRetries: 0 });
    expect(r.object).toEqual(want);
    expect(r.finishReason).toBe('stop');
    expect(r.response.headers?.['gateway-provider']).toBe(name);
    expect(paths).toEqual(['/v1/responses']);
    expectStructuredRequest(g, name);
  });
});
