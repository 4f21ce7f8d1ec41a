import { z } from 'zod';
import type { ModelSpec } from '../../config/gateway-config';
import type { CallContext, ChatRequest, StreamEvent } from '../provider-adapter';
import { MockAdapter } from './mock.adapter';

function ctx(upstream = 'mock-fast', reasoning: ModelSpec['reasoning']['mode'] = 'none'): CallContext {
  return {
    target: {
      provider: { id: 'mock', family: 'mock', headers: {}, timeouts: {} },
      model: { id: 'm', type: 'chat', targets: [], reasoning: { mode: reasoning, can_disable: true, budgets: {} } },
      upstream,
      timeouts: { connectMs: 1000, firstTokenMs: 1000, idleMs: 1000, totalMs: 1000 },
      maxResponseBytes: 1 << 20,
    },
    signal: new AbortController().signal,
    requestId: 'r',
  };
}

const mock = new MockAdapter();
const Weather = z.object({ city: z.string().min(2), unit: z.enum(['celsius', 'fahrenheit']), days: z.number().int().min(1).max(7), where: z.object({ lat: z.number(), lon: z.number() }) });
const weatherTool = { type: 'function' as const, function: { name: 'get_weather', parameters: z.toJSONSchema(Weather) as Record<string, unknown> } };
const otherTool = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] } } };
const ask: ChatRequest['messages'] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather in Paris?' }];

async function collect(req: ChatRequest, c = ctx()): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const e of await mock.chatStream(req, c)) out.push(e);
  return out;
}

describe('mock adapter: tools, JSON and reasoning', () => {
  it('declares tools and JSON schemas (recursive ones too)', () => {
    expect(mock.capabilities()).toMatchObject({ tools: true, jsonMode: true, jsonSchema: true, recursiveSchemas: true });
  });

  it('calls the first tool with arguments valid against its schema; tool_choice picks another; none answers in text', async () => {
    const r = await mock.chat({ messages: ask, tools: [weatherTool, otherTool] }, ctx());
    expect(r.choices[0].finish_reason).toBe('tool_calls');
    expect(r.choices[0].message.content).toBeNull();
    const call = r.choices[0].message.tool_calls![0];
    expect(call).toMatchObject({ id: 'call_mock_0_0', type: 'function', function: { name: 'get_weather' } });
    expect(Weather.parse(JSON.parse(call.function.arguments))).toEqual({ city: 'mock', unit: 'celsius', days: 1, where: { lat: 0, lon: 0 } });

    const named = await mock.chat({ messages: ask, tools: [weatherTool, otherTool], tool_choice: { type: 'function', function: { name: 'get_time' } } }, ctx());
    expect(named.choices[0].message.tool_calls![0].function).toEqual({ name: 'get_time', arguments: '{"tz":"mock"}' });
    const none = await mock.chat({ messages: ask, tools: [weatherTool], tool_choice: 'none' }, ctx());
    expect(none.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: expect.stringContaining('mock answer') } });
  });

  it('answers a tool result with text that uses it, so an agent loop ends', async () => {
    const messages: ChatRequest['messages'] = [
      ...ask,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_mock_0_0', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_mock_0_0', content: '{"temp_c":21}' },
    ];
    const r = await mock.chat({ messages, tools: [weatherTool] }, ctx());
    expect(r.choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: 'Mock answer from the tool results: get_weather returned {"temp_c":21}.' }, finish_reason: 'stop' });
  });

  it('json_schema: content valid against the schema ($defs followed); json_object: a JSON object', async () => {
    const Address = z.object({ city: z.string(), zip: z.string().length(5) });
    const Person = z.object({ name: z.string(), home: Address, work: Address.nullable(), tags: z.array(z.string()).min(1) });
    const schema = z.toJSONSchema(Person, { reused: 'ref' }) as Record<string, unknown>;
    expect(JSON.stringify(schema)).toContain('$defs');
    const r = await mock.chat({ messages: ask, response_format: { type: 'json_schema', json_schema: { name: 'person', schema } } }, ctx());
    expect(r.choices[0].finish_reason).toBe('stop');
    expect(() => Person.parse(JSON.parse(r.choices[0].message.content!))).not.toThrow();
    const obj = await mock.chat({ messages: ask, response_format: { type: 'json_object' } }, ctx());
    expect(JSON.parse(obj.choices[0].message.content!)).toEqual({ answer: expect.stringContaining('mock answer') });
  });

  it('reasoning text only when an effort is asked and the model enables reasoning', async () => {
    const thinking = await mock.chat({ messages: ask, reasoning_effort: 'high' }, ctx('mock-fast', 'effort'));
    expect(thinking.choices[0].message.reasoning_content).toBe('Mock reasoning at high effort: the last message has 3 words.');
    expect(thinking.usage!.reasoning_tokens).toBeGreaterThan(0);
    expect((await mock.chat({ messages: ask, reasoning_effort: 'high' }, ctx())).choices[0].message).not.toHaveProperty('reasoning_content');
    expect((await mock.chat({ messages: ask, reasoning_effort: 'none' }, ctx('mock-fast', 'effort'))).choices[0].message).not.toHaveProperty('reasoning_content');
  });

  it('streams reasoning deltas, then a tool call in OpenAI chunk order: id and name first, argument fragments after', async () => {
    const events = await collect({ messages: ask, tools: [weatherTool], reasoning_effort: 'low' }, ctx('mock-fast', 'effort'));
    const reasoning = events.filter((e) => e.type === 'delta' && e.reasoning).map((e) => (e as { reasoning: string }).reasoning).join('');
    expect(reasoning).toBe('Mock reasoning at low effort: the last message has 3 words.');
    const calls = events.flatMap((e) => (e.type === 'delta' ? (e.tool_calls ?? []) : []));
    expect(calls[0]).toEqual({ index: 0, id: 'call_mock_0_0', type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(calls.length).toBeGreaterThan(2);
    expect(calls.slice(1).every((c) => c.id === undefined && c.function?.name === undefined)).toBe(true);
    expect(Weather.parse(JSON.parse(calls.map((c) => c.function?.arguments ?? '').join('')))).toBeDefined();
    expect(events.slice(-2).map((e) => e.type)).toEqual(['finish', 'usage']);
    expect(events[events.length - 2]).toEqual({ type: 'finish', index: 0, finish_reason: 'tool_calls' });
  });

  it('streams JSON content that parses against the schema', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 2 } }, required: ['ok', 'n'] };
    const events = await collect({ messages: ask, response_format: { type: 'json_schema', json_schema: { name: 'r', schema } } });
    const text = events.map((e) => (e.type === 'delta' ? (e.content ?? '') : '')).join('');
    expect(JSON.parse(text)).toEqual({ ok: false, n: 2 });
  });
});
