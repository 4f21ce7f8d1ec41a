import { Agent, OpenAIChatCompletionsModel, OpenAIProvider, run, Runner, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai-v7';
import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, CITIES, ClientGateway, expectStructuredRequest, expectToolRoundTrip, mockAnswer, Person, startClientGateway, TOOL_UPSTREAMS, UPSTREAMS,
  WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * The OpenAI Agents SDK running an agent to completion through the gateway on its Chat Completions
 * model: `OpenAIChatCompletionsModel` over an `openai` client pointed at the gateway, or an
 * `OpenAIProvider({ baseURL, apiKey, useResponses: false })` given to a `Runner` (its default
 * Responses model is driven in openai-agents-responses.e2e-spec.ts). Tracing is off: its exporter
 * would send every run to OpenAI.
 */
setTracingDisabled(true);

let g: ClientGateway;
let client: OpenAI;
beforeAll(async () => {
  g = await startClientGateway();
  client = new OpenAI({ baseURL: g.baseURL, apiKey: API_KEY, maxRetries: 0 });
});
afterEach(() => g.reset());
afterAll(() => g.close());

/**
 * The SDK's chat model over our client. The Agents SDK has its own installed copy of `openai` 7.x:
 * the same version as ours, but TypeScript treats the two copies' client classes as distinct types
 * (their private fields), hence the narrow cast.
 */
const chatModel = (model: string) => new OpenAIChatCompletionsModel(client as unknown as ConstructorParameters<typeof OpenAIChatCompletionsModel>[0], model);

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

it('an agent without tools answers from the offline mock', async () => {
  const agent = new Agent({ name: 'Greeter', instructions: 'Be brief.', model: chatModel(CHAT_MODEL.mock) });
  const result = await run(agent, 'Say hello to the gateway.');
  expect(result.finalOutput).toBe(mockAnswer('Say hello to the gateway.'));
  expect(g.upstreamRequests()).toHaveLength(0);
});

describe.each(TOOL_UPSTREAMS)('via %s', (name) => {
  const model = CHAT_MODEL[name];

  it('one agent, one function tool, run to completion', async () => {
    const want = willCallWeather(g, name);
    const weather = getWeather();
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model: chatModel(model), tools: [weather.tool] });
    const result = await run(agent, QUESTION);
    expect(weather.calls).toEqual([WEATHER_ARGS]);
    expect(result.finalOutput).toBe(want);
    const items = result.newItems.map((i) => i.type);
    expect(items).toEqual(['tool_call_item', 'tool_call_output_item', 'message_output_item']);
    const call = result.newItems[0].rawItem;
    expect(call).toMatchObject({ type: 'function_call', name: WEATHER_TOOL.name });
    expect(JSON.parse((call as { arguments: string }).arguments)).toEqual(WEATHER_ARGS);
    expectToolRoundTrip(g, name);
    if (name === 'anthropic') expect(g.anthropic.requests[0].body.system).toContain('Answer with the weather tool.');
  });

  it('the same run streamed, through a Runner with a Chat Completions OpenAIProvider', async () => {
    const want = willCallWeather(g, name);
    const weather = getWeather();
    const runner = new Runner({ modelProvider: new OpenAIProvider({ baseURL: g.baseURL, apiKey: API_KEY, useResponses: false }) });
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model, tools: [weather.tool] });
    const stream = await runner.run(agent, QUESTION, { stream: true });
    let text = '';
    for await (const t of stream.toTextStream()) text += t;
    await stream.completed;
    expect(weather.calls).toEqual([WEATHER_ARGS]);
    expect(text).toBe(want);
    expect(stream.finalOutput).toBe(want);
    expectToolRoundTrip(g, name);
    if (name !== 'mock') expect(g.fake(name).requests.every((r) => r.body.stream === true || r.path.includes('stream'))).toBe(true);
  });
});

describe.each(UPSTREAMS)('structured output via %s', (name) => {
  it('an agent with a zod outputType: response_format json_schema, the final output parsed', async () => {
    const want = willAnswerPerson(g, name, 'output');
    const agent = new Agent({ name: 'Historian', instructions: 'Answer with the person.', model: chatModel(CHAT_MODEL[name]), outputType: Person });
    const result = await run(agent, 'Who wrote the first program?');
    expect(result.finalOutput).toEqual(want);
    expectStructuredRequest(g, name, 'output');
  });
});
