import { AnthropicFake } from '../../fakes/anthropic-fake';
import { FakeUpstream, RecordedRequest } from '../../fakes/fake-upstream';
import { fakeEmbedding as geminiVector, GeminiFake } from '../../fakes/gemini-fake';
import { fakeEmbedding as openaiVector, OpenAiFake } from '../../fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from '../../support/app';
import { z } from 'zod';

/**
 * One gateway for a client suite: the offline `mock` provider beside fake upstreams of the OpenAI,
 * Anthropic and Gemini families, so a third-party client is driven through pass-through and through
 * the gateway's translation both ways. Each catalogue model below is served by exactly one of them.
 */
export type UpstreamName = 'mock' | 'openai' | 'anthropic' | 'gemini';

/** Catalogue ids of the chat models, by the upstream that serves them. */
export const CHAT_MODEL: Record<UpstreamName, string> = { mock: 'mock-fast', openai: 'gpt', anthropic: 'claude', gemini: 'flash' };
/** Upstream model names the fakes must receive. */
export const UPSTREAM_MODEL = { openai: 'gpt-4o-mini-2024-07-18', anthropic: 'claude-haiku-4-5', gemini: 'gemini-2.5-flash' } as const;

/** Embedding models: Anthropic has no embeddings API, so it serves none. */
export const EMBED_MODEL = {
  mock: { model: 'mock-embed', dims: 8 },
  openai: { model: 'embed-small', dims: 16 },
  gemini: { model: 'gem-embed', dims: 768 },
} as const;
export type EmbedUpstreamName = keyof typeof EMBED_MODEL;

export const UPSTREAMS: UpstreamName[] = ['mock', 'openai', 'anthropic', 'gemini'];
/** Every upstream calls tools: the fakes as told, the mock by itself. */
export const TOOL_UPSTREAMS = UPSTREAMS;
export const EMBED_UPSTREAMS: EmbedUpstreamName[] = ['mock', 'openai', 'gemini'];

export const API_KEY = PRO_KEY;

export interface ClientGateway {
  app: TestApp;
  /** What a client is given as its base URL: the gateway's `/v1`. */
  baseURL: string;
  openai: OpenAiFake;
  anthropic: AnthropicFake;
  gemini: GeminiFake;
  fake(name: Exclude<UpstreamName, 'mock'>): FakeUpstream;
  /** Requests every fake received, in order. */
  upstreamRequests(): RecordedRequest[];
  reset(): void;
  close(): Promise<void>;
}

export async function startClientGateway(): Promise<ClientGateway> {
  const openai = new OpenAiFake({ variant: 'openai', apiKey: 'sk-openai-secret' });
  const anthropic = new AnthropicFake();
  const gemini = new GeminiFake();
  const fakes = { openai, anthropic, gemini };
  await Promise.all(Object.values(fakes).map((f) => f.start()));
  const yaml = `
providers:
  mock: { family: mock }
  openai: { family: openai, base_url: "${openai.url}", api_key: "sk-openai-secret" }
  anthropic: { family: anthropic, base_url: "${anthropic.url}", api_key: "sk-ant-secret" }
  gemini: { family: gemini, base_url: "${gemini.url}", api_key: "gm-secret" }
models:
  ${CHAT_MODEL.mock}: { provider: mock, type: chat }
  ${CHAT_MODEL.openai}: { provider: openai, upstream: ${UPSTREAM_MODEL.openai} }
  ${CHAT_MODEL.anthropic}: { provider: anthropic, upstream: ${UPSTREAM_MODEL.anthropic}, max_output_tokens: 1000 }
  ${CHAT_MODEL.gemini}: { provider: gemini, upstream: ${UPSTREAM_MODEL.gemini} }
  ${EMBED_MODEL.mock.model}: { provider: mock, type: embedding, dimensions: ${EMBED_MODEL.mock.dims} }
  ${EMBED_MODEL.openai.model}: { provider: openai, type: embedding, upstream: text-embedding-3-small }
  ${EMBED_MODEL.gemini.model}: { provider: gemini, type: embedding, upstream: gemini-embedding-001, dimensions: ${EMBED_MODEL.gemini.dims} }
routes:
  - { name: default, orgs: ["*"], models: [auto], targets: [mock/${CHAT_MODEL.mock}] }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${API_KEY}" } ]
`;
  const app = await startTestApp({ yaml });
  return {
    app,
    baseURL: `${app.url}/v1`,
    ...fakes,
    fake: (name) => fakes[name],
    upstreamRequests: () => Object.values(fakes).flatMap((f) => f.requests),
    reset: () => Object.values(fakes).forEach((f) => f.reset()),
    async close() {
      await app.close();
      await Promise.all(Object.values(fakes).map((f) => f.stop()));
    },
  };
}

/** The offline mock's answer: deterministic, from its upstream name and the last user message. */
export function mockAnswer(userText: string): string {
  const words = userText.split(/\s+/).filter(Boolean).length;
  return `This is a mock answer from ${CHAT_MODEL.mock} to a message of ${words} words.`;
}

/**
 * Makes the upstream behind `name` answer `text` to the next chat request and returns what the
 * client must see: the fake's text, or the mock's own answer to `userText`.
 */
export function willAnswer(g: ClientGateway, name: UpstreamName, text: string, userText: string): string {
  if (name === 'mock') return mockAnswer(userText);
  g.fake(name).next({ text, usage: { prompt: 11, completion: 7 } });
  return text;
}

/** Text of a message's content in any family's shape: a string, or parts/blocks with `text`. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
  if (content && typeof content === 'object' && Array.isArray((content as { parts?: unknown }).parts)) return textOf((content as { parts: unknown[] }).parts);
  return '';
}

/**
 * The one chat request the upstream behind `name` received, checked for the family's translation of
 * a conversation of one system instruction and one user message: OpenAI gets it as sent (the upstream
 * model name swapped in); Anthropic gets `system` lifted to the top level and `max_tokens` always set;
 * Gemini gets `systemInstruction`, `contents` and the streaming endpoint when the client streamed.
 * The mock has no upstream: nothing may have gone out.
 */
export function expectTranslatedChat(g: ClientGateway, name: UpstreamName, want: { system: string; user: string; stream: boolean }): RecordedRequest | undefined {
  if (name === 'mock') {
    expect(g.upstreamRequests()).toHaveLength(0);
    return undefined;
  }
  const requests = g.fake(name).requests;
  expect(requests).toHaveLength(1);
  const r = requests[0];
  if (name === 'openai') {
    expect(r.path).toBe('/chat/completions');
    expect(r.headers.authorization).toBe('Bearer sk-openai-secret');
    expect(r.body.model).toBe(UPSTREAM_MODEL.openai);
    expect(r.body.stream === true).toBe(want.stream);
    const roles = r.body.messages.map((m: { role: string; content: unknown }) => [m.role, textOf(m.content)]);
    expect(roles).toEqual([[expect.stringMatching(/^(system|developer)$/), want.system], ['user', want.user]]);
  } else if (name === 'anthropic') {
    expect(r.path).toBe('/v1/messages');
    expect(r.headers['x-api-key']).toBe('sk-ant-secret');
    expect(r.body.model).toBe(UPSTREAM_MODEL.anthropic);
    expect(textOf(r.body.system)).toBe(want.system);
    expect(Number.isInteger(r.body.max_tokens) && r.body.max_tokens > 0).toBe(true);
    expect(r.body.messages.map((m: { role: string; content: unknown }) => [m.role, textOf(m.content)])).toEqual([['user', want.user]]);
    expect(r.body.stream === true).toBe(want.stream);
  } else {
    const method = want.stream ? 'streamGenerateContent?alt=sse' : 'generateContent';
    expect(r.path).toBe(`/models/${UPSTREAM_MODEL.gemini}:${method}`);
    expect(r.headers['x-goog-api-key']).toBe('gm-secret');
    expect(textOf(r.body.systemInstruction)).toBe(want.system);
    expect(r.body.contents.map((c: { role: string; parts: unknown }) => [c.role, textOf(c.parts)])).toEqual([['user', want.user]]);
  }
  return r;
}

/**
 * The tool the suites declare, as a JSON schema (each client wraps it in its own helper). The city is
 * an enum so the offline mock, which calls a tool with the first value its schema allows, calls it
 * with the same arguments as the fakes are told to.
 */
export const CITIES = ['Paris', 'London'] as const;
export const WEATHER_TOOL = {
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', enum: [...CITIES] } }, required: ['city'], additionalProperties: false },
} as const;
export const WEATHER_ARGS = { city: 'Paris' };
export const WEATHER_RESULT = 'sunny, 21 C';
export const WEATHER_ANSWER = 'It is sunny in Paris.';

/**
 * The upstream behind `name` calls the weather tool, then answers the tool result with text; returns
 * that final answer. The mock does so by itself, quoting the tool result it was sent.
 */
export function willCallWeather(g: ClientGateway, name: UpstreamName, result = WEATHER_RESULT): string {
  if (name === 'mock') return `Mock answer from the tool results: ${WEATHER_TOOL.name} returned ${result}.`;
  g.fake(name).next({ toolCall: { name: WEATHER_TOOL.name, arguments: JSON.stringify(WEATHER_ARGS) } }, { text: WEATHER_ANSWER });
  return WEATHER_ANSWER;
}

/**
 * A tool round trip as the upstream behind `name` saw it: the tool declared in the first request and
 * the call and its result sent back in the second (nothing went out for the mock).
 */
export function expectToolRoundTrip(g: ClientGateway, name: UpstreamName): void {
  if (name === 'mock') return void expect(g.upstreamRequests()).toHaveLength(0);
  const requests = g.fake(name).requests;
  expect(requests).toHaveLength(2);
  expectToolDeclared(name, requests[0]);
  expectToolResultSent(name, requests[1]);
}

/** The tool declared to the upstream in the family's own shape, in a request the fake received. */
export function expectToolDeclared(name: Exclude<UpstreamName, 'mock'>, r: RecordedRequest): void {
  const props = expect.objectContaining({ properties: { city: expect.objectContaining({ enum: [...CITIES] }) } });
  if (name === 'openai') {
    expect(r.body.tools).toEqual([{ type: 'function', function: expect.objectContaining({ name: WEATHER_TOOL.name, parameters: props }) }]);
  } else if (name === 'anthropic') {
    expect(r.body.tools).toEqual([expect.objectContaining({ name: WEATHER_TOOL.name, input_schema: props })]);
  } else {
    expect(r.body.tools).toEqual([{ functionDeclarations: [expect.objectContaining({ name: WEATHER_TOOL.name })] }]);
    expect(JSON.stringify(r.body.tools[0].functionDeclarations[0])).toMatch(/"city".*"Paris","London"/);
  }
}

/**
 * The second request of a tool round trip: the assistant's tool call and the tool's result, in the
 * family's shape (OpenAI `tool` message; Anthropic `tool_use` then a user `tool_result` block with
 * the same id; Gemini a `functionCall` part then a `functionResponse` part naming the function).
 */
export function expectToolResultSent(name: Exclude<UpstreamName, 'mock'>, r: RecordedRequest, result = WEATHER_RESULT): void {
  const body = JSON.stringify(r.body);
  expect(body).toContain(result.replace(/"/g, '\\"'));
  if (name === 'openai') {
    const call = r.body.messages.find((m: any) => m.role === 'assistant' && m.tool_calls);
    expect(call.tool_calls).toEqual([expect.objectContaining({ id: 'call_fake1', type: 'function', function: { name: WEATHER_TOOL.name, arguments: expect.any(String) } })]);
    expect(JSON.parse(call.tool_calls[0].function.arguments)).toEqual(WEATHER_ARGS);
    const tool = r.body.messages.find((m: any) => m.role === 'tool');
    expect(tool).toMatchObject({ tool_call_id: 'call_fake1' });
    expect(textOf(tool.content)).toContain(result);
  } else if (name === 'anthropic') {
    const blocks = r.body.messages.flatMap((m: any) => (Array.isArray(m.content) ? m.content.map((b: any) => ({ role: m.role, ...b })) : []));
    const use = blocks.find((b: any) => b.type === 'tool_use');
    expect(use).toMatchObject({ role: 'assistant', id: 'toolu_01Fake', name: WEATHER_TOOL.name, input: WEATHER_ARGS });
    const res = blocks.find((b: any) => b.type === 'tool_result');
    expect(res).toMatchObject({ role: 'user', tool_use_id: 'toolu_01Fake' });
    expect(textOf(res.content)).toContain(result);
  } else {
    const parts = r.body.contents.flatMap((c: any) => c.parts.map((p: any) => ({ role: c.role, ...p })));
    expect(parts.find((p: any) => p.functionCall)).toMatchObject({ role: 'model', functionCall: { name: WEATHER_TOOL.name, args: WEATHER_ARGS } });
    expect(parts.find((p: any) => p.functionResponse)).toMatchObject({ role: 'user', functionResponse: { name: WEATHER_TOOL.name } });
  }
}

/**
 * An embedding a client returned for `text`, checked against what the upstream behind `name` makes:
 * the fakes' deterministic vectors (Gemini's truncated to the configured size and renormalised by
 * the gateway), compared within float32 precision since the SDKs' default base64 carries float32.
 * The mock's vectors are its own: a unit vector of the configured size.
 */
export function expectEmbedding(name: EmbedUpstreamName, text: string, v: number[]): void {
  expect(v).toHaveLength(EMBED_MODEL[name].dims);
  expect(Math.hypot(...v)).toBeCloseTo(1, 5);
  if (name === 'mock') return;
  const raw = name === 'openai' ? openaiVector(text, EMBED_MODEL.openai.dims) : geminiVector(text, EMBED_MODEL.gemini.dims);
  const norm = Math.hypot(...raw);
  const want = raw.map((x) => x / norm);
  expect(Math.max(...v.map((x, i) => Math.abs(x - want[i])))).toBeLessThan(1e-6);
}

/** The embeddings request the upstream behind `name` received (none for the mock). */
export function expectTranslatedEmbeddings(g: ClientGateway, name: EmbedUpstreamName, input: string[]): void {
  if (name === 'mock') return void expect(g.upstreamRequests()).toHaveLength(0);
  const requests = g.fake(name).requests;
  expect(requests).toHaveLength(1);
  const r = requests[0];
  if (name === 'openai') {
    expect(r.path).toBe('/embeddings');
    expect(r.body).toMatchObject({ model: 'text-embedding-3-small', input, encoding_format: 'float' });
  } else if (input.length === 1) {
    expect(r.path).toBe('/models/gemini-embedding-001:embedContent');
    expect(r.body).toEqual({ content: { parts: [{ text: input[0] }] }, outputDimensionality: EMBED_MODEL.gemini.dims });
  } else {
    expect(r.path).toBe('/models/gemini-embedding-001:batchEmbedContents');
    expect(r.body.requests).toEqual(
      input.map((text) => ({ model: 'models/gemini-embedding-001', content: { parts: [{ text }] }, outputDimensionality: EMBED_MODEL.gemini.dims })),
    );
  }
}

/**
 * The structured answer the suites ask for (`response_format: json_schema`, or a client's forced
 * tool). Its schema allows PERSON as the first value of each field (the first enum value, the
 * minimum), which is what the offline mock fills a schema with, so every upstream answers the same.
 */
export const PERSON = { name: 'Ada', born: 1815 };
export const PERSON_SCHEMA_NAME = 'person';
export const Person = z.object({ name: z.enum(['Ada', 'Grace']), born: z.number().int().min(1815) });

/**
 * The upstream behind `name` answers the next structured request with PERSON: OpenAI and Gemini as
 * JSON text, Anthropic through the tool the gateway forces (named after the schema).
 */
export function willAnswerPerson(g: ClientGateway, name: UpstreamName, schemaName = PERSON_SCHEMA_NAME): typeof PERSON {
  if (name === 'anthropic') g.anthropic.next({ toolCall: { id: 'toolu_01Person', name: schemaName, arguments: JSON.stringify(PERSON) } });
  else if (name !== 'mock') g.fake(name).next({ text: JSON.stringify(PERSON) });
  return PERSON;
}

/**
 * The one structured request the upstream behind `name` received, in the family's terms: OpenAI's
 * `response_format` as sent; Anthropic a tool named after the schema, forced by `tool_choice`;
 * Gemini JSON output with the schema converted to its `responseSchema`.
 */
export function expectStructuredRequest(g: ClientGateway, name: UpstreamName, schemaName = PERSON_SCHEMA_NAME): void {
  if (name === 'mock') return void expect(g.upstreamRequests()).toHaveLength(0);
  const requests = g.fake(name).requests;
  expect(requests).toHaveLength(1);
  const body = requests[0].body;
  const fields = expect.objectContaining({ properties: expect.objectContaining({ name: expect.anything(), born: expect.anything() }) });
  if (name === 'openai') {
    expect(body.response_format).toEqual({ type: 'json_schema', json_schema: expect.objectContaining({ name: schemaName, schema: fields }) });
  } else if (name === 'anthropic') {
    expect(body.tools).toEqual(expect.arrayContaining([expect.objectContaining({ name: schemaName, input_schema: fields })]));
    expect(body.tool_choice).toMatchObject({ type: 'tool', name: schemaName });
  } else {
    expect(body.generationConfig).toMatchObject({ responseMimeType: 'application/json', responseSchema: fields });
  }
}
