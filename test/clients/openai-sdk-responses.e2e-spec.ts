import OpenAI from 'openai';
import OpenAIv7 from 'openai-v7';
import { zodTextFormat as zodTextFormatV7 } from 'openai-v7/helpers/zod';
import { VERSION as V7 } from 'openai-v7/version';
import { zodTextFormat } from 'openai/helpers/zod';
import { VERSION as V6 } from 'openai/version';
import {
  API_KEY, CHAT_MODEL, ClientGateway, expectStructuredRequest, expectToolRoundTrip, expectTranslatedChat, Person, PERSON_SCHEMA_NAME, startClientGateway,
  TOOL_UPSTREAMS, UPSTREAMS, WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswer, willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * The official `openai` SDK, 6.x and 7.x, on the Responses API (`client.responses`), used as its
 * users write it with only `baseURL` and `apiKey` changed: `create` as JSON and as an event stream,
 * the `stream` helper, a function tool round trip with `function_call_output` items, and `parse`
 * with `zodTextFormat`, against the offline mock and fake OpenAI, Anthropic and Gemini upstreams.
 * Every upstream receives a chat request in its family's shape: the gateway maps Responses onto its
 * chat pipeline. Typed with 6.x's declarations, as in the chat suite.
 */
let g: ClientGateway;
beforeAll(async () => {
  g = await startClientGateway();
});
afterEach(() => g.reset());
afterAll(() => g.close());

const SDKS: Array<[string, () => OpenAI, typeof zodTextFormat]> = [
  [`openai ${V6}`, () => new OpenAI({ apiKey: API_KEY, baseURL: g.baseURL, maxRetries: 0 }), zodTextFormat],
  [`openai ${V7}`, () => new OpenAIv7({ apiKey: API_KEY, baseURL: g.baseURL, maxRetries: 0 }) as unknown as OpenAI, zodTextFormatV7 as unknown as typeof zodTextFormat],
];

const INSTRUCTIONS = 'Be brief.';
const USER = 'Say hello to the gateway.';

type Event = OpenAI.Responses.ResponseStreamEvent;

describe.each(SDKS)('%s', (_label, make, textFormat) => {
  let client: OpenAI;
  beforeAll(() => {
    client = make();
  });

  describe.each(UPSTREAMS)('responses via %s', (name) => {
    const model = CHAT_MODEL[name];

    it('responses.create: the Response, output_text, usage and the Gateway-* headers', async () => {
      const want = willAnswer(g, name, `Hello from ${name}, through the Responses API.`, USER);
      const { data, response } = await client.responses.create({ model, instructions: INSTRUCTIONS, input: USER, max_output_tokens: 64 }).withResponse();
      expect(data).toMatchObject({ object: 'response', status: 'completed', model, error: null, instructions: INSTRUCTIONS, max_output_tokens: 64 });
      expect(data.id).toMatch(/^resp_/);
      expect(data.output).toEqual([expect.objectContaining({ type: 'message', role: 'assistant', content: [expect.objectContaining({ type: 'output_text', text: want })] })]);
      expect(data.output_text).toBe(want);
      expect(data.usage!.total_tokens).toBe(data.usage!.input_tokens + data.usage!.output_tokens);
      if (name !== 'mock') expect(data.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 });
      expect(response.headers.get('gateway-provider')).toBe(name);
      expect(response.headers.get('gateway-model')).toBe(model);
      const sent = expectTranslatedChat(g, name, { system: INSTRUCTIONS, user: USER, stream: false });
      if (name === 'openai') expect(sent!.body.max_completion_tokens).toBe(64);
      if (name === 'anthropic') expect(sent!.body.max_tokens).toBe(64);
      if (name === 'gemini') expect(sent!.body.generationConfig).toMatchObject({ maxOutputTokens: 64 });
    });

    it('responses.create with stream: true: numbered events, text deltas adding up to response.completed', async () => {
      const want = willAnswer(g, name, `Streamed hello from ${name}: one two three.`, USER);
      const stream = await client.responses.create({ model, instructions: INSTRUCTIONS, input: USER, stream: true });
      const ev: Event[] = [];
      for await (const e of stream) ev.push(e);
      const types = ev.map((e) => e.type);
      expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
      expect(types[types.length - 1]).toBe('response.completed');
      expect(ev.map((e) => e.sequence_number)).toEqual(ev.map((_, i) => i));
      const deltas = ev.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.join('')).toBe(want);
      const done = ev[ev.length - 1] as OpenAI.Responses.ResponseCompletedEvent;
      expect(done.response).toMatchObject({ status: 'completed', model, output_text: want });
      if (name !== 'mock') expect(done.response.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 });
      expectTranslatedChat(g, name, { system: INSTRUCTIONS, user: USER, stream: true });
    });

    it('the responses.stream helper: text snapshots and the final response', async () => {
      const want = willAnswer(g, name, `Helper stream from ${name}, in pieces.`, USER);
      const stream = client.responses.stream({ model, instructions: INSTRUCTIONS, input: USER });
      const snapshots: string[] = [];
      stream.on('response.output_text.delta', (e) => snapshots.push(e.snapshot));
      const final = await stream.finalResponse();
      expect(final.status).toBe('completed');
      expect(final.output_text).toBe(want);
      expect(snapshots[snapshots.length - 1]).toBe(want);
      expect(snapshots.length).toBeGreaterThan(1);
      expectTranslatedChat(g, name, { system: INSTRUCTIONS, user: USER, stream: true });
    });
  });

  describe.each(TOOL_UPSTREAMS)('function tools via %s', (name) => {
    const model = CHAT_MODEL[name];
    const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', ...WEATHER_TOOL, parameters: { ...WEATHER_TOOL.parameters }, strict: true }];
    const ask: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'What is the weather in Paris?' }];

    it('a function_call item, its function_call_output sent back with the output items, the answer', async () => {
      const want = willCallWeather(g, name);
      const first = await client.responses.create({ model, input: ask, tools });
      const calls = first.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
      expect(calls).toHaveLength(1);
      const call = calls[0];
      expect(call).toMatchObject({ name: WEATHER_TOOL.name, status: 'completed' });
      expect(JSON.parse(call.arguments)).toEqual(WEATHER_ARGS);
      expect(call.call_id).toMatch(/\S/);
      expect(first.output_text).toBe('');

      const second = await client.responses.create({
        model,
        tools,
        input: [...ask, ...first.output, { type: 'function_call_output', call_id: call.call_id, output: WEATHER_RESULT }],
      });
      expect(second.status).toBe('completed');
      expect(second.output.map((o) => o.type)).toEqual(['message']);
      expect(second.output_text).toBe(want);
      expectToolRoundTrip(g, name);
    });

    it('a streamed function call: function_call_arguments events, the call in response.completed', async () => {
      willCallWeather(g, name);
      const stream = await client.responses.create({ model, input: ask, tools, stream: true });
      let args = '';
      let doneArgs = '';
      let completed: OpenAI.Responses.Response | undefined;
      for await (const e of stream) {
        if (e.type === 'response.function_call_arguments.delta') args += e.delta;
        if (e.type === 'response.function_call_arguments.done') doneArgs = e.arguments;
        if (e.type === 'response.completed') completed = e.response;
      }
      expect(JSON.parse(args)).toEqual(WEATHER_ARGS);
      expect(doneArgs).toBe(args);
      expect(completed!.output).toEqual([expect.objectContaining({ type: 'function_call', name: WEATHER_TOOL.name, arguments: args })]);
    });
  });

  describe.each(UPSTREAMS)('structured outputs via %s', (name) => {
    it('responses.parse with zodTextFormat: text.format json_schema, output_parsed', async () => {
      const want = willAnswerPerson(g, name);
      const r = await client.responses.parse({
        model: CHAT_MODEL[name],
        input: 'Who wrote the first program?',
        text: { format: textFormat(Person, PERSON_SCHEMA_NAME) },
      });
      expect(r.output_parsed).toEqual(want);
      expect(JSON.parse(r.output_text)).toEqual(want);
      expect(r.text).toMatchObject({ format: { type: 'json_schema', name: PERSON_SCHEMA_NAME } });
      expectStructuredRequest(g, name);
    });
  });
});
