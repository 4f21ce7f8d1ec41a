import { Agent, OpenAIResponsesModel, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai-v7';
import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, CITIES, ClientGateway, expectStructuredRequest, expectToolRoundTrip, mockAnswer, Person, startClientGateway, TOOL_UPSTREAMS, UPSTREAMS,
  WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * The OpenAI Agents SDK on its default model, which speaks the Responses API: an `openai` client
 * pointed at the gateway made the SDK's default with `setDefaultOpenAIClient`, agents naming a model
 * by its id, and the explicit `OpenAIResponsesModel`; against the offline mock and fake OpenAI,
 * Anthropic and Gemini upstreams. Tracing is off: its exporter would send every run to OpenAI.
 */
setTracingDisabled(true);

let g: ClientGateway;
let client: OpenAI;
/** The gateway paths the client called, recorded by the fetch it is given. */
let paths: string[] = [];
beforeAll(async () => {
  g = await startClientGateway();
  client = new OpenAI({
    baseURL: g.baseURL,
    apiKey: API_KEY,
    maxRetries: 0,
    fetch: (url, init) => {
      paths.push(new URL(url instanceof Request ? url.url : String(url)).pathname);
      return fetch(url, init);
    },
  });
  // The Agents SDK has its own installed copy of `openai` 7.x: the same version as ours, whose
  // client class TypeScript treats as a distinct type (private fields), hence the narrow cast.
  setDefaultOpenAIClient(client as unknown as Parameters<typeof setDefaultOpenAIClient>[0]);
});
afterEach(() => {
  g.reset();
  paths = [];
});
afterAll(() => g.close());

const getWeather = () => {
  const calls: unknown[] = [];
  const t = tool({
    name: WEATHER_TOOL.name,
    description: WEATHER_TOOL.description,
    parameters: z.object({ city: z.enum(CITIES) }),
    execute: async (input) => {
      calls.push(input);
      return input.city === WEATHER_ARGS.city ? WEATHER_RESULT : 'unknown city';
    },
  });
  return { tool: t, calls };
};

const QUESTION = 'What is the weather in Paris?';

it('an agent without tools answers from the offline mock over POST /v1/responses', async () => {
  const agent = new Agent({ name: 'Greeter', instructions: 'Be brief.', model: CHAT_MODEL.mock });
  const result = await run(agent, 'Say hello to the gateway.');
  expect(result.finalOutput).toBe(mockAnswer('Say hello to the gateway.'));
  expect(paths).toEqual(['/v1/responses']);
  expect(g.upstreamRequests()).toHaveLength(0);
});

describe.each(TOOL_UPSTREAMS)('via %s', (name) => {
  const model = CHAT_MODEL[name];

  it('one agent, one function tool, run to completion on the default Responses model', async () => {
    const want = willCallWeather(g, name);
    const weather = getWeather();
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model, tools: [weather.tool] });
    const result = await run(agent, QUESTION);
    expect(weather.calls).toEqual([WEATHER_ARGS]);
    expect(result.finalOutput).toBe(want);
    expect(result.newItems.map((i) => i.type)).toEqual(['tool_call_item', 'tool_call_output_item', 'message_output_item']);
    const call = result.newItems[0].rawItem;
    expect(call).toMatchObject({ type: 'function_call', name: WEATHER_TOOL.name });
    expect(JSON.parse((call as { arguments: string }).arguments)).toEqual(WEATHER_ARGS);
    expect(paths).toEqual(['/v1/responses', '/v1/responses']);
    expectToolRoundTrip(g, name);
    if (name === 'anthropic') expect(g.anthropic.requests[0].body.system).toContain('Answer with the weather tool.');
  });

  it('the same run streamed, with an explicit OpenAIResponsesModel', async () => {
    const want = willCallWeather(g, name);
    const weather = getWeather();
    const responsesModel = new OpenAIResponsesModel(client as unknown as ConstructorParameters<typeof OpenAIResponsesModel>[0], model);
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model: responsesModel, tools: [weather.tool] });
    const stream = await run(agent, QUESTION, { stream: true });
    let text = '';
    for await (const t of stream.toTextStream()) text += t;
    await stream.completed;
    expect(stream.error ?? null).toBeNull();
    expect(weather.calls).toEqual([WEATHER_ARGS]);
    expect(text).toBe(want);
    expect(stream.finalOutput).toBe(want);
    expect(paths).toEqual(['/v1/responses', '/v1/responses']);
    expectToolRoundTrip(g, name);
    if (name !== 'mock') expect(g.fake(name).requests.every((r) => r.body.stream === true || r.path.includes('stream'))).toBe(true);
  });
});

describe.each(UPSTREAMS)('structured output via %s', (name) => {
  it('an agent with a zod outputType: text.format json_schema, the final output parsed', async () => {
    const want = willAnswerPerson(g, name, 'output');
    const agent = new Agent({ name: 'Historian', instructions: 'Answer with the person.', model: CHAT_MODEL[name], outputType: Person });
    const result = await run(agent, 'Who wrote the first program?');
    expect(result.finalOutput).toEqual(want);
    expect(paths).toEqual(['/v1/responses']);
    expectStructuredRequest(g, name, 'output');
  });
});
