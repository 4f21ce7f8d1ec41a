import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { AnthropicFake } from './fakes/anthropic-fake';
import { GeminiFake } from './fakes/gemini-fake';
import { OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { rejectedWith } from './support/kit';

/**
 * `response_format: json_schema` through the official `openai` SDK (`create` and the `parse` helper
 * with `zodResponseFormat`), against fake upstreams that check structured output as the real APIs do
 * and against the offline mock; plus the mock's tool-call round trip and reasoning text.
 */
let t: TestApp;
let client: OpenAI;
const openai = new OpenAiFake({ variant: 'openai' });
const groq = new OpenAiFake({ variant: 'groq' });
const anthropic = new AnthropicFake();
const gemini = new GeminiFake();
const fakes = [openai, groq, anthropic, gemini];

beforeAll(async () => {
  await Promise.all(fakes.map((f) => f.start()));
  const yaml = `
providers:
  openai: { family: openai, base_url: "${openai.url}", api_key: "k" }
  groq: { family: groq, base_url: "${groq.url}", api_key: "k" }
  anthropic: { family: anthropic, base_url: "${anthropic.url}", api_key: "k" }
  gemini: { family: gemini, base_url: "${gemini.url}", api_key: "k" }
  mock: { family: mock }
models:
  gpt: { provider: openai, upstream: gpt-4o-mini }
  llama: { provider: groq, upstream: llama-3.3-70b-versatile }
  claude: { provider: anthropic, upstream: claude-haiku-4-5, reasoning: { mode: budget } }
  claude-native: { provider: anthropic, upstream: claude-sonnet-4-5, structured_output: native }
  flash: { provider: gemini, upstream: gemini-2.0-flash }
  flash-native: { provider: gemini, upstream: gemini-2.5-flash, structured_output: native }
  local: { provider: mock, upstream: mock-local, reasoning: { mode: effort } }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
`;
  t = await startTestApp({ yaml });
  client = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterEach(() => fakes.forEach((f) => f.reset()));
afterAll(async () => {
  await t.close();
  await Promise.all(fakes.map((f) => f.stop()));
});

const Address = z.object({ city: z.string(), zip: z.string() });
const Person = z.object({ name: z.string(), home: Address, work: Address.nullable(), tags: z.array(z.enum(['a', 'b'])) });
/** Reused parts as `$defs` (what `z.toJSONSchema` and many clients send), in OpenAI's strict form. */
const PERSON_SCHEMA = z.toJSONSchema(Person, { reused: 'ref' }) as Record<string, unknown>;
const PERSON = { name: 'Ada', home: { city: 'Paris', zip: '75001' }, work: null, tags: ['a'] };
const personFormat = { type: 'json_schema' as const, json_schema: { name: 'person', schema: PERSON_SCHEMA, strict: true } };
const ask = [{ role: 'user' as const, content: 'Who is Ada?' }];

/** Every key of a JSON value, nested. */
function keysOf(v: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(v)) v.forEach((x) => keysOf(x, out));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) (out.add(k), keysOf(x, out));
  return out;
}

const apiError = (p: Promise<unknown>) => rejectedWith<InstanceType<typeof OpenAI.APIError>>(p, OpenAI.APIError);

async function streamed(model: string, extra: Record<string, unknown> = {}) {
  const stream = await client.chat.completions.create({ model, messages: ask, stream: true, ...extra } as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
  let content = '';
  let reasoning = '';
  const calls: { id?: string; name?: string; arguments: string }[] = [];
  let finish: string | null = null;
  for await (const c of stream) {
    const d = c.choices[0]?.delta as (OpenAI.Chat.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string }) | undefined;
    content += d?.content ?? '';
    reasoning += d?.reasoning_content ?? '';
    for (const tc of d?.tool_calls ?? []) {
      calls[tc.index] ??= { arguments: '' };
      if (tc.id) calls[tc.index].id = tc.id;
      if (tc.function?.name) calls[tc.index].name = tc.function.name;
      calls[tc.index].arguments += tc.function?.arguments ?? '';
    }
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  return { content, reasoning, calls, finish };
}

describe.each([
  ['gpt', () => openai],
  ['claude', () => anthropic],
  ['claude-native', () => anthropic],
  ['flash', () => gemini],
  ['flash-native', () => gemini],
])('json_schema via %s', (model, fake) => {
  it('JSON: the answer parses and matches the schema, with no tool wrapper', async () => {
    fake().next({ text: JSON.stringify(PERSON) });
    const r = await client.chat.completions.create({ model, messages: ask, response_format: personFormat });
    expect(r.choices[0].finish_reason).toBe('stop');
    expect(r.choices[0].message.tool_calls).toBeUndefined();
    expect(Person.parse(JSON.parse(r.choices[0].message.content!))).toEqual(PERSON);
    expect(fake().requests).toHaveLength(1);
  });

  it('stream: content deltas that join into the JSON, no tool-call delta, finish stop', async () => {
    fake().next({ text: JSON.stringify(PERSON) });
    const s = await streamed(model, { response_format: personFormat });
    expect(s.calls).toEqual([]);
    expect(s.finish).toBe('stop');
    expect(Person.parse(JSON.parse(s.content))).toEqual(PERSON);
  });

  it("the SDK's parse helper with zodResponseFormat gets the parsed object", async () => {
    fake().next({ text: JSON.stringify(PERSON) });
    const r = await client.chat.completions.parse({ model, messages: ask, response_format: zodResponseFormat(Person, 'person') });
    expect(r.choices[0].message.parsed).toEqual(PERSON);
  });
});

describe('what each family received', () => {
  it('openai: response_format passed through unchanged, $defs included', async () => {
    openai.next({ text: JSON.stringify(PERSON) });
    await client.chat.completions.create({ model: 'gpt', messages: ask, response_format: personFormat });
    expect(openai.requests[0].body.response_format).toEqual(personFormat);
  });

  it('anthropic forced tool: the schema as a forced tool, and thinking left off even when reasoning is asked', async () => {
    anthropic.next({ text: JSON.stringify(PERSON) });
    const r = await client.chat.completions.create({ model: 'claude', messages: ask, response_format: personFormat, reasoning_effort: 'high' });
    const body = anthropic.requests[0].body;
    expect(body.tools).toEqual([{ name: 'person', description: expect.any(String), input_schema: PERSON_SCHEMA }]);
    expect(body.tool_choice).toEqual({ type: 'tool', name: 'person' });
    expect(body).not.toHaveProperty('thinking');
    expect(JSON.parse(r.choices[0].message.content!)).toEqual(PERSON);
  });

  it('anthropic native: output_config.format, no tools', async () => {
    anthropic.next({ text: JSON.stringify(PERSON) });
    await client.chat.completions.create({ model: 'claude-native', messages: ask, response_format: personFormat });
    const body = anthropic.requests[0].body;
    expect(body.output_config).toEqual({ format: { type: 'json_schema', schema: PERSON_SCHEMA } });
    expect(body).not.toHaveProperty('tools');
  });

  it('gemini converted: responseSchema with no keyword Gemini refuses; native: responseJsonSchema as sent', async () => {
    gemini.next({ text: JSON.stringify(PERSON) }, { text: JSON.stringify(PERSON) });
    await client.chat.completions.create({ model: 'flash', messages: ask, response_format: personFormat });
    await client.chat.completions.create({ model: 'flash-native', messages: ask, response_format: personFormat });
    const converted = gemini.requests[0].body.generationConfig;
    expect(converted.responseMimeType).toBe('application/json');
    const keys = keysOf(converted.responseSchema);
    for (const k of ['$ref', '$defs', '$schema', 'additionalProperties', 'const']) expect(keys.has(k)).toBe(false);
    expect(converted.responseSchema.properties.home).toMatchObject({ type: 'object', properties: { city: { type: 'string' } } });
    expect(gemini.requests[1].body.generationConfig).toEqual({ responseMimeType: 'application/json', responseJsonSchema: PERSON_SCHEMA });
  });

  it('the Gemini fake refuses an unknown schema keyword the way Gemini does (what conversion guards against)', async () => {
    const res = await fetch(`${gemini.url}/v1beta/models/gemini-2.0-flash:generateContent`, {
      method: 'POST',
      body: JSON.stringify({ contents: [], generationConfig: { responseMimeType: 'application/json', responseSchema: { type: 'object', additionalProperties: false } } }),
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('Unknown name \\"additionalProperties\\"');
  });
});

describe('targets that cannot take the schema', () => {
  const recursive = {
    type: 'json_schema' as const,
    json_schema: { name: 'tree', schema: { type: 'object', properties: { name: { type: 'string' }, kids: { type: 'array', items: { $ref: '#' } } }, required: ['name', 'kids'] } },
  };

  it('a model whose structured_output is none is skipped; with no other target, 400 naming response_format, no upstream call', async () => {
    const err = await apiError(client.chat.completions.create({ model: 'llama', messages: ask, response_format: personFormat }));
    expect([err.status, (err.error as any).code, (err.error as any).param]).toEqual([400, 'invalid_request', 'response_format']);
    expect(groq.requests).toHaveLength(0);
    openai.next({ text: JSON.stringify(PERSON) });
    const r = await client.chat.completions.create({ model: 'llama,gpt', messages: ask, response_format: personFormat });
    expect(r.model).toBe('gpt');
    expect(groq.requests).toHaveLength(0);
  });

  it('a recursive schema cannot be converted for Gemini: 400 saying why, no upstream call; native Gemini takes it', async () => {
    const err = await apiError(client.chat.completions.create({ model: 'flash', messages: ask, response_format: recursive }));
    expect([err.status, (err.error as any).param]).toEqual([400, 'response_format.json_schema.schema']);
    expect((err.error as any).message).toContain('recursive');
    expect(gemini.requests).toHaveLength(0);
    gemini.next({ text: '{"name":"root","kids":[]}' });
    const r = await client.chat.completions.create({ model: 'flash,flash-native', messages: ask, response_format: recursive });
    expect([r.model, JSON.parse(r.choices[0].message.content!)]).toEqual(['flash-native', { name: 'root', kids: [] }]);
  });
});

describe('bad response_format: 400 with param, no upstream call', () => {
  const js = (json_schema: unknown) => ({ type: 'json_schema', json_schema });
  it.each([
    [js({ name: 'has space', schema: {} }), 'response_format.json_schema.name'],
    [js({ name: 'x'.repeat(65), schema: {} }), 'response_format.json_schema.name'],
    [js({ name: '', schema: {} }), 'response_format.json_schema.name'],
    [js({ name: 7, schema: {} }), 'response_format.json_schema.name'],
    [js({ name: 'ok', schema: [] }), 'response_format.json_schema.schema'],
    [js({ name: 'ok', schema: 'object' }), 'response_format.json_schema.schema'],
    [js({ name: 'ok' }), 'response_format.json_schema.schema'],
    [js({ name: 'ok', schema: {}, strict: 'yes' }), 'response_format.json_schema.strict'],
    [js({ name: 'ok', schema: {}, description: 3 }), 'response_format.json_schema.description'],
    [js({ name: 'ok', schema: {}, extra: 1 }), 'response_format.json_schema.extra'],
    [js({ name: 'ok', schema: { properties: { a: { $ref: '#/$defs/Missing' } } } }), 'response_format.json_schema.schema'],
    [js({ name: 'ok', schema: { $ref: 'https://example.com/schema.json' } }), 'response_format.json_schema.schema'],
    [js('person'), 'response_format.json_schema'],
    [{ type: 'json_schema' }, 'response_format.json_schema'],
    [{ type: 'yaml' }, 'response_format.type'],
    [{ type: 'json_object', json_schema: {} }, 'response_format'],
  ])('%j → %s', async (response_format, param) => {
    for (const model of ['gpt', 'claude', 'flash', 'local']) {
      const err = await apiError(client.chat.completions.create({ model, messages: ask, response_format: response_format as any }));
      expect([err.status, (err.error as any).code, (err.error as any).param]).toEqual([400, 'invalid_request', param]);
    }
    for (const f of fakes) expect(f.requests).toHaveLength(0);
  });
});

describe('the offline mock', () => {
  const weather: OpenAI.Chat.ChatCompletionTool = {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false },
    },
  };

  it('tools round trip: a tool call, then a tool result, then a final text answer', async () => {
    const first = await client.chat.completions.create({ model: 'local', messages: ask, tools: [weather] });
    expect(first.choices[0].finish_reason).toBe('tool_calls');
    const call = first.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'mock', unit: 'celsius' });
    const second = await client.chat.completions.create({
      model: 'local',
      tools: [weather],
      messages: [...ask, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c":21}' }],
    });
    expect(second.choices[0].finish_reason).toBe('stop');
    expect(second.choices[0].message.tool_calls).toBeUndefined();
    expect(second.choices[0].message.content).toContain('{"temp_c":21}');
  });

  it('streams the tool call in OpenAI chunk shape', async () => {
    const s = await streamed('local', { tools: [weather] });
    expect(s.finish).toBe('tool_calls');
    expect(s.calls).toEqual([{ id: expect.stringMatching(/^call_/), name: 'get_weather', arguments: '{"city":"mock","unit":"celsius"}' }]);
  });

  it('json_schema: the answer validates against the schema, in JSON and streams, and through parse', async () => {
    const r = await client.chat.completions.create({ model: 'local', messages: ask, response_format: personFormat });
    expect(() => Person.parse(JSON.parse(r.choices[0].message.content!))).not.toThrow();
    const s = await streamed('local', { response_format: personFormat });
    expect(s.content).toBe(r.choices[0].message.content);
    const parsed = await client.chat.completions.parse({ model: 'local', messages: ask, response_format: zodResponseFormat(Person, 'person') });
    expect(Person.parse(parsed.choices[0].message.parsed)).toBeDefined();
  });

  it('json_object: a JSON object', async () => {
    const r = await client.chat.completions.create({ model: 'local', messages: ask, response_format: { type: 'json_object' } });
    expect(typeof JSON.parse(r.choices[0].message.content!)).toBe('object');
  });

  it('reasoning_content when reasoning_effort is asked of a model that reasons, in JSON and streams', async () => {
    const r = await client.chat.completions.create({ model: 'local', messages: ask, reasoning_effort: 'medium' });
    expect((r.choices[0].message as { reasoning_content?: string }).reasoning_content).toContain('medium effort');
    expect(r.usage?.completion_tokens_details?.reasoning_tokens).toBeGreaterThan(0);
    const s = await streamed('local', { reasoning_effort: 'medium' });
    expect(s.reasoning).toBe((r.choices[0].message as { reasoning_content?: string }).reasoning_content);
    const plain = await client.chat.completions.create({ model: 'local', messages: ask });
    expect(plain.choices[0].message).not.toHaveProperty('reasoning_content');
  });
});
