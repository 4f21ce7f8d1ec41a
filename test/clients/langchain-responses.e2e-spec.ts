import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, CITIES, ClientGateway, expectStructuredRequest, expectToolRoundTrip, expectTranslatedChat, Person, PERSON_SCHEMA_NAME, startClientGateway,
  TOOL_UPSTREAMS, textOf, UpstreamName, UPSTREAMS, WEATHER_ARGS, WEATHER_RESULT, WEATHER_TOOL, willAnswer, willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * LangChain's `ChatOpenAI` with `useResponsesApi: true`: `invoke`, `stream`, `bindTools` with a tool
 * message round trip and `withStructuredOutput`, over `POST /v1/responses`, against the offline mock
 * and fake OpenAI, Anthropic and Gemini upstreams. LangSmith tracing is pinned off so no run can
 * reach out.
 */
process.env.LANGSMITH_TRACING = 'false';
process.env.LANGCHAIN_TRACING_V2 = 'false';

let g: ClientGateway;
/** The gateway paths the client called, recorded by the fetch it is given. */
let paths: string[] = [];
beforeAll(async () => {
  g = await startClientGateway();
});
afterEach(() => {
  g.reset();
  paths = [];
});
afterAll(() => g.close());

const recordingFetch: typeof fetch = (url, init) => {
  paths.push(new URL(url instanceof Request ? url.url : String(url)).pathname);
  return fetch(url, init);
};

const chat = (name: UpstreamName) =>
  new ChatOpenAI({ model: CHAT_MODEL[name], apiKey: API_KEY, configuration: { baseURL: g.baseURL, fetch: recordingFetch }, maxRetries: 0, useResponsesApi: true });

const SYSTEM = 'Be brief.';
const USER = 'Say hello to the gateway.';
const conversation = () => [new SystemMessage(SYSTEM), new HumanMessage(USER)];

describe.each(UPSTREAMS)('ChatOpenAI (useResponsesApi) via %s', (name) => {
  it('invoke: the AI message, its usage metadata and the served model', async () => {
    const want = willAnswer(g, name, `Hello from ${name}, through the Responses API.`, USER);
    const msg = await chat(name).invoke(conversation());
    expect(msg).toBeInstanceOf(AIMessage);
    expect(msg.text).toBe(want);
    expect(msg.tool_calls).toEqual([]);
    expect(msg.response_metadata).toMatchObject({ model_name: CHAT_MODEL[name], status: 'completed' });
    expect(msg.response_metadata.id).toMatch(/^resp_/);
    const usage = msg.usage_metadata!;
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    if (name !== 'mock') expect([usage.input_tokens, usage.output_tokens]).toEqual([11, 7]);
    expect(paths).toEqual(['/v1/responses']);
    expectTranslatedChat(g, name, { system: SYSTEM, user: USER, stream: false });
  });

  it('stream: the chunks concatenate to the answer, with the usage', async () => {
    const want = willAnswer(g, name, `Streamed hello from ${name}: one two three.`, USER);
    let whole: AIMessageChunk | undefined;
    let chunks = 0;
    for await (const c of await chat(name).stream(conversation())) {
      chunks++;
      whole = whole ? whole.concat(c) : c;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(whole!.text).toBe(want);
    const usage = whole!.usage_metadata!;
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    if (name !== 'mock') expect([usage.input_tokens, usage.output_tokens]).toEqual([11, 7]);
    expect(paths).toEqual(['/v1/responses']);
    expectTranslatedChat(g, name, { system: SYSTEM, user: USER, stream: true });
  });
});

describe.each(TOOL_UPSTREAMS)('bindTools (useResponsesApi) via %s', (name) => {
  const getWeather = tool(async ({ city }: { city: string }) => (city === WEATHER_ARGS.city ? WEATHER_RESULT : 'unknown city'), {
    name: WEATHER_TOOL.name,
    description: WEATHER_TOOL.description,
    schema: z.object({ city: z.enum(CITIES) }),
  });
  const question = () => new HumanMessage('What is the weather in Paris?');

  it('a function_call in the AI message; the tool message sent back as function_call_output; the answer', async () => {
    const want = willCallWeather(g, name);
    const model = chat(name).bindTools([getWeather]);
    const first = await model.invoke([question()]);
    expect(first.tool_calls).toHaveLength(1);
    expect(first.tool_calls![0]).toMatchObject({ name: WEATHER_TOOL.name, args: WEATHER_ARGS, id: expect.stringMatching(/\S/) });

    const result: ToolMessage = await getWeather.invoke(first.tool_calls![0]);
    expect(result.tool_call_id).toBe(first.tool_calls![0].id);
    const second = await model.invoke([question(), first, result]);
    expect(textOf(second.content)).toBe(want);
    expect(second.tool_calls).toEqual([]);
    expect(paths).toEqual(['/v1/responses', '/v1/responses']);
    expectToolRoundTrip(g, name);
  });

  it('a streamed tool call: the chunks concatenate to the call', async () => {
    willCallWeather(g, name);
    let whole: AIMessageChunk | undefined;
    for await (const c of await chat(name).bindTools([getWeather]).stream([question()])) whole = whole ? whole.concat(c) : c;
    expect(whole!.tool_calls).toEqual([expect.objectContaining({ name: WEATHER_TOOL.name, args: WEATHER_ARGS })]);
    expect(paths).toEqual(['/v1/responses']);
  });
});

describe.each(UPSTREAMS)('withStructuredOutput (useResponsesApi) via %s', (name) => {
  it('default: text.format json_schema, the parsed object', async () => {
    const want = willAnswerPerson(g, name);
    const structured = chat(name).withStructuredOutput(Person, { name: PERSON_SCHEMA_NAME });
    expect(await structured.invoke('Who wrote the first program?')).toEqual(want);
    expect(paths).toEqual(['/v1/responses']);
    expectStructuredRequest(g, name);
  });
});
