import { Agent, OpenAIChatCompletionsModel, OpenAIProvider, run, Runner, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai-v7';
import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, ClientGateway, expectToolDeclared, expectToolResultSent, mockAnswer, startClientGateway, TOOL_UPSTREAMS, WEATHER_ANSWER, WEATHER_ARGS, WEATHER_RESULT,
  WEATHER_TOOL, willCallWeather,
} from './support/client-gateway';

/**
 * The OpenAI Agents SDK running an agent to completion through the gateway. The SDK speaks the
 * Responses API by default, which the gateway does not serve, so agents get its Chat Completions
 * model: `OpenAIChatCompletionsModel` over an `openai` client pointed at the gateway, or an
 * `OpenAIProvider({ baseURL, apiKey, useResponses: false })` given to a `Runner`. Tracing is off:
 * its exporter would send every run to OpenAI.
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
    parameters: z.object({ city: z.string() }),
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
    willCallWeather(g, name);
    const weather = getWeather();
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model: chatModel(model), tools: [weather.tool] });
    const result = await run(agent, QUESTION);
    expect(weather.calls).toEqual([WEATHER_ARGS]);
    expect(result.finalOutput).toBe(WEATHER_ANSWER);
    const items = result.newItems.map((i) => i.type);
    expect(items).toEqual(['tool_call_item', 'tool_call_output_item', 'message_output_item']);
    const call = result.newItems[0].rawItem;
    expect(call).toMatchObject({ type: 'function_call', name: WEATHER_TOOL.name });
    expect(JSON.parse((call as { arguments: string }).arguments)).toEqual(WEATHER_ARGS);
    expect(g.fake(name).requests).toHaveLength(2);
    const [first, second] = g.fake(name).requests;
    expectToolDeclared(name, first);
    expectToolResultSent(name, second);
    if (name === 'anthropic') expect(first.body.system).toContain('Answer with the weather tool.');
  });

  it('the same run streamed, through a Runner with a Chat Completions OpenAIProvider', async () => {
    willCallWeather(g, name);
    const weather = getWeather();
    const runner = new Runner({ modelProvider: new OpenAIProvider({ baseURL: g.baseURL, apiKey: API_KEY, useResponses: false }) });
    const agent = new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model, tools: [weather.tool] });
    const stream = await runner.run(agent, QUESTION, { stream: true });
    let text = '';
    for await (const t of stream.toTextStream()) text += t;
    await stream.completed;
    expect(weather.calls).toEqual([WEATHER_ARGS]);
    expect(text).toBe(WEATHER_ANSWER);
    expect(stream.finalOutput).toBe(WEATHER_ANSWER);
    const [first, second] = g.fake(name).requests;
    expect(first.body.stream === true || first.path.includes('stream')).toBe(true);
    expectToolDeclared(name, first);
    expectToolResultSent(name, second);
  });
});
