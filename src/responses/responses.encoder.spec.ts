import { StreamBrokenError } from '../common/http/responder';
import type { StreamEvent } from '../providers/provider-adapter';
import { parseResponsesBody } from './responses-request';
import { jsonResponseBody, ResponseIdentity, ResponsesSseEncoder } from './responses.encoder';

const idn: ResponseIdentity = { id: 'resp_abc', created_at: 1700000000, model: 'claude' };
const echo = parseResponsesBody({ model: 'm', input: 'x', instructions: 'Be brief.', metadata: { k: 'v' } }).echo;

/** The SSE text as (event name, data) pairs, checking each frame's `event:` line matches its data's type. */
function frames(sse: string): Array<{ type: string; data: any }> {
  return sse
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const [eventLine, dataLine, ...rest] = frame.split('\n');
      expect(rest).toEqual([]);
      expect(eventLine.startsWith('event: ')).toBe(true);
      const data = JSON.parse(dataLine.slice('data: '.length));
      expect(data.type).toBe(eventLine.slice('event: '.length));
      return { type: data.type, data };
    });
}

function run(events: StreamEvent[], enc = new ResponsesSseEncoder(idn, echo)): Array<{ type: string; data: any }> {
  let out = '';
  for (const e of events) out += enc.event(e) ?? '';
  return frames(out + enc.end());
}

describe('jsonResponseBody', () => {
  it('is the Response object: message output, output_text, usage, the request echoed', () => {
    const body = jsonResponseBody(
      idn,
      echo,
      { index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' },
      { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8, reasoning_tokens: 1 },
    );
    expect(body).toEqual({
      id: 'resp_abc',
      object: 'response',
      created_at: 1700000000,
      status: 'completed',
      background: false,
      error: null,
      incomplete_details: null,
      instructions: 'Be brief.',
      max_output_tokens: null,
      model: 'claude',
      output: [{ id: 'msg_abc', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hello' }] }],
      output_text: 'Hello',
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: null,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: null,
      truncation: 'disabled',
      usage: { input_tokens: 5, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 1 }, total_tokens: 8 },
      metadata: { k: 'v' },
    });
  });

  it('reasoning first, then function calls with their call ids; no empty message beside tool calls', () => {
    const body = jsonResponseBody(idn, echo, {
      index: 0,
      message: { role: 'assistant', content: null, reasoning_content: 'think', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      finish_reason: 'tool_calls',
    }, undefined);
    expect(body.status).toBe('completed');
    expect(body.output).toEqual([
      { id: 'rs_abc', type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'think' }], status: 'completed' },
      { id: 'fc_abc_0', type: 'function_call', status: 'completed', arguments: '{"a":1}', call_id: 'call_1', name: 'f' },
    ]);
    expect(body.output_text).toBe('');
    expect(body.usage).toMatchObject({ input_tokens: 0, output_tokens: 0, total_tokens: 0 });
  });

  it.each([
    ['length', 'max_output_tokens'],
    ['content_filter', 'content_filter'],
  ] as const)('finish %s is incomplete with reason %s', (finish, reason) => {
    const body = jsonResponseBody(idn, echo, { index: 0, message: { role: 'assistant', content: 'cut' }, finish_reason: finish }, undefined);
    expect(body).toMatchObject({ status: 'incomplete', incomplete_details: { reason }, output: [{ type: 'message', status: 'incomplete' }] });
  });
});

describe('ResponsesSseEncoder', () => {
  it('a text answer: the exact event sequence, sequence numbers from 0, text done and completed with usage', () => {
    const f = run([
      { type: 'delta', index: 0, content: 'Hel' },
      { type: 'delta', index: 0, content: 'lo' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'usage', usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 } },
    ]);
    expect(f.map((x) => x.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(f.map((x) => x.data.sequence_number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(f[0].data.response).toMatchObject({ id: 'resp_abc', status: 'in_progress', output: [], usage: null, instructions: 'Be brief.' });
    expect(f[2].data).toMatchObject({ output_index: 0, item: { type: 'message', status: 'in_progress', role: 'assistant', content: [] } });
    const itemId = f[2].data.item.id;
    expect(f[3].data).toMatchObject({ item_id: itemId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '' } });
    expect(f[4].data).toMatchObject({ item_id: itemId, output_index: 0, content_index: 0, delta: 'Hel' });
    expect(f[6].data).toMatchObject({ item_id: itemId, text: 'Hello' });
    expect(f[7].data.part).toEqual({ type: 'output_text', annotations: [], logprobs: [], text: 'Hello' });
    expect(f[8].data.item).toMatchObject({ id: itemId, status: 'completed', content: [{ type: 'output_text', text: 'Hello' }] });
    expect(f[9].data.response).toMatchObject({
      status: 'completed',
      output_text: 'Hello',
      output: [{ id: itemId, type: 'message', status: 'completed' }],
      usage: { input_tokens: 4, output_tokens: 2, total_tokens: 6 },
    });
  });

  it('reasoning then text: a reasoning item closed before the message opens', () => {
    const f = run([
      { type: 'delta', index: 0, reasoning: 'Let me ' },
      { type: 'delta', index: 0, reasoning: 'think.' },
      { type: 'delta', index: 0, content: 'Yes.' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
    ]);
    expect(f.map((x) => x.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.reasoning_text.delta',
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(f[2].data.item).toMatchObject({ type: 'reasoning', summary: [] });
    expect(f[3].data.part).toEqual({ type: 'reasoning_text', text: '' });
    expect(f[6].data).toMatchObject({ output_index: 0, content_index: 0, text: 'Let me think.' });
    expect(f[9].data.output_index).toBe(1);
    expect(f[15].data.response.output.map((o: any) => o.type)).toEqual(['reasoning', 'message']);
    expect(f[15].data.response.output[0].content).toEqual([{ type: 'reasoning_text', text: 'Let me think.' }]);
  });

  it('tool calls: one function_call item per call, arguments streamed, done with name and arguments', () => {
    const f = run([
      { type: 'delta', index: 0, tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'time', arguments: '{}' } }] },
      { type: 'finish', index: 0, finish_reason: 'tool_calls' },
    ]);
    expect(f.map((x) => x.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(f[2].data.item).toMatchObject({ type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '', status: 'in_progress' });
    expect(f[7].data).toMatchObject({ output_index: 0, arguments: '{"city":"Oslo"}', name: 'weather' });
    expect(f[11].data.response.output).toEqual([
      expect.objectContaining({ type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' }),
      expect.objectContaining({ type: 'function_call', call_id: 'call_2', name: 'time', arguments: '{}', status: 'completed' }),
    ]);
  });

  it('a cut answer ends in response.incomplete with the reason', () => {
    const f = run([
      { type: 'delta', index: 0, content: 'Once upon' },
      { type: 'finish', index: 0, finish_reason: 'length' },
    ]);
    expect(f[f.length - 1]).toMatchObject({
      type: 'response.incomplete',
      data: { response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [{ status: 'incomplete' }] } },
    });
    expect(f.some((x) => x.type === 'response.completed')).toBe(false);
  });

  it('a failure after the first output: response.failed, no done events and no response.completed', () => {
    const enc = new ResponsesSseEncoder(idn, echo);
    let out = enc.event({ type: 'delta', index: 0, content: 'Partial' }) ?? '';
    out += enc.failed(new StreamBrokenError('upstream_error'));
    const f = frames(out);
    expect(f.map((x) => x.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.failed',
    ]);
    expect(f[5].data.sequence_number).toBe(5);
    expect(f[5].data.response).toMatchObject({
      status: 'failed',
      error: { code: 'server_error', message: 'The upstream provider failed mid-stream.' },
      output: [{ type: 'message', status: 'in_progress', content: [{ text: 'Partial' }] }],
    });
  });

  it('usage-derived Gateway-* values as trailers', () => {
    const enc = new ResponsesSseEncoder(idn, echo);
    enc.event({ type: 'delta', index: 0, content: 'x' });
    enc.event({ type: 'usage', usage: { prompt_tokens: 1, completion_tokens: 20, total_tokens: 21, reasoning_tokens: 16 }, timing: { queue_time: 0.01 } });
    enc.end();
    expect(enc.trailers()).toEqual({ 'Gateway-Reasoning-Tokens': '16', 'Gateway-Queue-Time': '0.01' });
  });
});
