import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { z } from 'zod';
import {
  API_KEY, CHAT_MODEL, CITIES, ClientGateway, EMBED_MODEL, EMBED_UPSTREAMS, expectEmbedding, expectStructuredRequest, expectToolRoundTrip, expectTranslatedChat,
  expectTranslatedEmbeddings, Person, PERSON, PERSON_SCHEMA_NAME, startClientGateway, TOOL_UPSTREAMS, UpstreamName, UPSTREAMS, WEATHER_ARGS, WEATHER_RESULT,
  WEATHER_TOOL, willAnswer, willAnswerPerson, willCallWeather,
} from './support/client-gateway';

/**
 * LangChain's `@langchain/openai` pointed at the gateway with `configuration: { baseURL }`: chat models
 * (`invoke`, `stream`, `bindTools` and a tool message round trip) and `OpenAIEmbeddings`, against the
 * offline mock and fake OpenAI, Anthropic and Gemini upstreams. LangSmith tracing is off unless its
 * environment asks for it; it is pinned off here so no run can reach out.
 */
process.env.LANGSMITH_TRACING = 'false';
process.env.LANGCHAIN_TRACING_V2 = 'false';

let g: ClientGateway;
beforeAll(async () => {
  g = await startClientGateway();
});
afterEach(() => g.reset());
afterAll(() => g.close());

const chat = (name: UpstreamName) => new ChatOpenAI({ model: CHAT_MODEL[name], apiKey: API_KEY, configuration: { baseURL: g.baseURL }, maxRetries: 0 });

const SYSTEM = 'Be brief.';
const USER = 'Say hello to the gateway.';
const conversation = () => [new SystemMessage(SYSTEM), new HumanMessage(USER)];

describe.each(UPSTREAMS)('ChatOpenAI via %s', (name) => {
  it('invoke: the AI message, its usage metadata and the served model', async () => {
    const want = willAnswer(g, name, `Hello from ${name}, through the gateway.`, USER);
    const msg = await chat(name).invoke(conversation());
    expect(msg).toBeInstanceOf(AIMessage);
    expect(msg.content).toBe(want);
    expect(msg.tool_calls).toEqual([]);
    expect(msg.response_metadata).toMatchObject({ model_name: CHAT_MODEL[name], finish_reason: 'stop' });
    const usage = msg.usage_metadata!;
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    if (name !== 'mock') expect([usage.input_tokens, usage.output_tokens]).toEqual([11, 7]);
    expectTranslatedChat(g, name, { system: SYSTEM, user: USER, stream: false });
  });

  it('stream: the chunks concatenate to the answer, with the usage (LangChain asks for it)', async () => {
    const want = willAnswer(g, name, `Streamed hello from ${name}: one two three.`, USER);
    let whole: AIMessageChunk | undefined;
    let chunks = 0;
    for await (const c of await chat(name).stream(conversation())) {
      chunks++;
      whole = whole ? whole.concat(c) : c;
    }
    expect(chunks).toBeGreaterThan(3);
    expect(whole!.content).toBe(want);
    const usage = whole!.usage_metadata!;
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    if (name !== 'mock') expect([usage.input_tokens, usage.output_tokens]).toEqual([11, 7]);
    const sent = expectTranslatedChat(g, name, { system: SYSTEM, user: USER, stream: true });
    if (name === 'openai') expect(sent!.body.stream_options).toEqual({ include_usage: true });
  });
});

describe.each(TOOL_UPSTREAMS)('bindTools via %s', (name) => {
  const getWeather = tool(async ({ city }: { city: string }) => (city === WEATHER_ARGS.city ? WEATHER_RESULT : 'unknown city'), {
    name: WEATHER_TOOL.name,
    description: WEATHER_TOOL.description,
    schema: z.object({ city: z.enum(CITIES) }),
  });
  const question = () => new HumanMessage('What is the weather in Paris?');

  it('a tool call in the AI message; the tool message sent back; the answer', async () => {
    const want = willCallWeather(g, name);
    const model = chat(name).bindTools([getWeather]);
    const first = await model.invoke([question()]);
    expect(first.tool_calls).toHaveLength(1);
    expect(first.tool_calls![0]).toMatchObject({ name: WEATHER_TOOL.name, args: WEATHER_ARGS, id: expect.stringMatching(/\S/) });
    expect(first.response_metadata.finish_reason).toBe('tool_calls');

    const result: ToolMessage = await getWeather.invoke(first.tool_calls![0]);
    expect(result).toBeInstanceOf(ToolMessage);
    expect(result.tool_call_id).toBe(first.tool_calls![0].id);
    const second = await model.invoke([question(), first, result]);
    expect(second.content).toBe(want);
    expect(second.tool_calls).toEqual([]);
    expectToolRoundTrip(g, name);
  });

  it('a streamed tool call: the chunks concatenate to the call', async () => {
    willCallWeather(g, name);
    let whole: AIMessageChunk | undefined;
    for await (const c of await chat(name).bindTools([getWeather]).stream([question()])) whole = whole ? whole.concat(c) : c;
    expect(whole!.tool_calls).toEqual([expect.objectContaining({ name: WEATHER_TOOL.name, args: WEATHER_ARGS })]);
  });
});

describe.each(UPSTREAMS)('withStructuredOutput via %s', (name) => {
  it('default (json_schema): response_format json_schema, the parsed object', async () => {
    const want = willAnswerPerson(g, name);
    const structured = chat(name).withStructuredOutput(Person, { name: PERSON_SCHEMA_NAME });
    expect(await structured.invoke('Who wrote the first program?')).toEqual(want);
    expectStructuredRequest(g, name);
  });

  it('function calling: the schema as a forced tool call, parsed into the object', async () => {
    if (name !== 'mock') g.fake(name).next({ toolCall: { name: PERSON_SCHEMA_NAME, arguments: JSON.stringify(PERSON) } });
    const structured = chat(name).withStructuredOutput(Person, { name: PERSON_SCHEMA_NAME, method: 'functionCalling' });
    expect(await structured.invoke('Who wrote the first program?')).toEqual(PERSON);
    if (name === 'mock') return void expect(g.upstreamRequests()).toHaveLength(0);
    const sent = g.fake(name).requests[0].body;
    // The forced choice of that one tool, in the family's own terms.
    if (name === 'openai') expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'person' } });
    if (name === 'anthropic') expect(sent.tool_choice).toMatchObject({ type: 'tool', name: 'person' });
    if (name === 'gemini') expect(sent.toolConfig).toEqual({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['person'] } });
  });
});

describe.each(EMBED_UPSTREAMS)('OpenAIEmbeddings via %s', (name) => {
  const { model } = EMBED_MODEL[name];
  const embeddings = () => new OpenAIEmbeddings({ model, apiKey: API_KEY, configuration: { baseURL: g.baseURL }, maxRetries: 0 });

  it('embedDocuments: one vector per document, in order', async () => {
    const docs = ['the first document', 'a second, different document', 'a third'];
    const vectors = await embeddings().embedDocuments(docs);
    expect(vectors).toHaveLength(3);
    vectors.forEach((v, i) => expectEmbedding(name, docs[i], v));
    expectTranslatedEmbeddings(g, name, docs);
  });

  it('embedQuery: one vector, equal to the same text embedded as a document', async () => {
    const v = await embeddings().embedQuery('where is the gateway?');
    expectEmbedding(name, 'where is the gateway?', v);
    expectTranslatedEmbeddings(g, name, ['where is the gateway?']);
    g.reset();
    expect(await embeddings().embedDocuments(['where is the gateway?'])).toEqual([v]);
  });
});
