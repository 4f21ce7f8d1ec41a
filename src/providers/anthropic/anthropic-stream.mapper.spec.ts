import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StreamEvent } from '../provider-adapter';
import { readSse } from '../sse/sse-reader';
import { UpstreamError } from '../upstream-error';
import { AnthropicStreamMapper } from './anthropic-stream.mapper';
import type { WireStreamEvent } from './anthropic.wire';

const fixture = (name: string) => readFileSync(join(__dirname, 'fixtures', name), 'utf8');

async function* bytes(text: string, every: number): AsyncGenerator<Buffer> {
  const buf = Buffer.from(text, 'utf8');
  for (let i = 0; i < buf.length; i += every) yield buf.subarray(i, i + every);
}

/** Runs a recorded SSE body through the real reader and the mapper, as the adapter does. */
async function run(text: string, every = 7): Promise<StreamEvent[]> {
  const mapper = new AnthropicStreamMapper();
  const out: StreamEvent[] = [];
  for await (const sse of readSse(bytes(text, every))) {
    const ev = JSON.parse(sse.data) as WireStreamEvent;
    expect(sse.event).toBe(ev.type);
    out.push(...mapper.push(ev));
  }
  mapper.end();
  return out;
}

const start: WireStreamEvent = {
  type: 'message_start',
  message: { id: 'm', type: 'message', role: 'assistant', model: 'c', content: [], stop_reason: null, usage: { input_tokens: 5, cache_creation_input_tokens: 100, cache_read_input_tokens: 20, output_tokens: 1 } },
};

describe('anthropic stream mapping', () => {
  it('the recorded text stream: content deltas, ping ignored, finish and cumulative usage at message_stop', async () => {
    expect(await run(fixture('stream-text.sse'))).toEqual([
      { type: 'delta', index: 0, content: 'Hello' },
      { type: 'delta', index: 0, content: '!' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'usage', usage: { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42 } },
    ]);
  });

  it('the recorded thinking + tool_use stream: reasoning, tool call numbered among tool blocks, arguments from input_json_delta', async () => {
    expect(await run(fixture('stream-thinking-tool.sse'), 1)).toEqual([
      { type: 'delta', index: 0, reasoning: 'The user wants…' },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, id: 'toolu_01', type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: '{"city": "Par' } }] },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: 'is"}' } }] },
      { type: 'finish', index: 0, finish_reason: 'tool_calls' },
      // input usage from message_start, output from the cumulative message_delta
      { type: 'usage', usage: { prompt_tokens: 12, completion_tokens: 80, total_tokens: 92 } },
    ]);
  });

  it('the recorded in-band error event throws a status error after the content already yielded', async () => {
    const mapper = new AnthropicStreamMapper();
    const seen: StreamEvent[] = [];
    let err: unknown;
    try {
      for await (const sse of readSse(bytes(fixture('stream-error.sse'), 5))) seen.push(...mapper.push(JSON.parse(sse.data)));
    } catch (e) {
      err = e;
    }
    expect(seen).toEqual([{ type: 'delta', index: 0, content: 'Hello' }]);
    expect(err).toBeInstanceOf(UpstreamError);
    expect([(err as UpstreamError).kind, (err as UpstreamError).status, (err as UpstreamError).opts.code]).toEqual(['status', 529, 'overloaded_error']);
  });

  it('several tool_use blocks after text and thinking are numbered 0, 1 (not by block index)', () => {
    const m = new AnthropicStreamMapper();
    m.push(start);
    const out = [
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'a', name: 'f', input: {} } },
      { type: 'content_block_start', index: 3, content_block: { type: 'tool_use', id: 'b', name: 'g', input: {} } },
      { type: 'content_block_delta', index: 3, delta: { type: 'input_json_delta', partial_json: '{"y":2}' } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"x":1}' } },
    ].flatMap((e) => m.push(e as WireStreamEvent));
    expect(out.flatMap((e) => (e.type === 'delta' ? (e.tool_calls ?? []) : [])).map((t) => [t.index, t.id ?? t.function?.arguments])).toEqual([
      [0, 'a'],
      [1, 'b'],
      [1, '{"y":2}'],
      [0, '{"x":1}'],
    ]);
  });

  it('usage: cache tokens count as prompt tokens, later message_delta values replace earlier ones, thinking tokens are reasoning tokens', () => {
    const m = new AnthropicStreamMapper();
    m.push(start);
    m.push({ type: 'message_delta', delta: { stop_reason: null }, usage: { output_tokens: 10 } });
    m.push({ type: 'message_delta', delta: { stop_reason: 'max_tokens' }, usage: { output_tokens: 64, output_tokens_details: { thinking_tokens: 40 } } });
    expect(m.push({ type: 'message_stop' })).toEqual([
      { type: 'finish', index: 0, finish_reason: 'length' },
      { type: 'usage', usage: { prompt_tokens: 125, completion_tokens: 64, total_tokens: 189, reasoning_tokens: 40 } },
    ]);
  });

  it('thinking text in content_block_start and refusal map too; no usage anywhere → no usage event', () => {
    const m = new AnthropicStreamMapper();
    m.push({ type: 'message_start', message: { id: 'm', type: 'message', role: 'assistant', model: 'c', content: [], stop_reason: null } });
    expect(m.push({ type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: 'hmm', signature: '' } })).toEqual([{ type: 'delta', index: 0, reasoning: 'hmm' }]);
    expect(m.push({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } })).toEqual([]);
    m.push({ type: 'message_delta', delta: { stop_reason: 'refusal' } });
    expect(m.push({ type: 'message_stop' })).toEqual([{ type: 'finish', index: 0, finish_reason: 'content_filter' }]);
  });

  it('a stream that ends without message_stop is a protocol error', () => {
    const m = new AnthropicStreamMapper();
    m.push(start);
    m.push({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    m.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } });
    m.push({ type: 'message_delta', delta: { stop_reason: 'end_turn' } });
    expect(() => m.end()).toThrow(expect.objectContaining({ kind: 'protocol' }));
  });

  it('events after message_stop yield nothing; unknown events are ignored', () => {
    const m = new AnthropicStreamMapper();
    m.push(start);
    expect(m.push({ type: 'future_event' } as never)).toEqual([]);
    m.push({ type: 'message_stop' });
    expect(m.push({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: 'late' } })).toEqual([]);
    expect(() => m.end()).not.toThrow();
  });

  it('out-of-order events are protocol errors', () => {
    expect(() => new AnthropicStreamMapper().push({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })).toThrow(
      expect.objectContaining({ kind: 'protocol' }),
    );
    expect(() => new AnthropicStreamMapper().push({ type: 'message_stop' })).toThrow(expect.objectContaining({ kind: 'protocol' }));
    const m = new AnthropicStreamMapper();
    m.push(start);
    expect(() => m.push({ type: 'content_block_delta', index: 4, delta: { type: 'text_delta', text: 'x' } })).toThrow(expect.objectContaining({ kind: 'protocol' }));
  });
});

describe('anthropic structured output stream: the forced response tool unwrapped', () => {
  async function runWith(text: string, tool: string | undefined, every = 5): Promise<StreamEvent[]> {
    const mapper = new AnthropicStreamMapper(tool);
    const out: StreamEvent[] = [];
    for await (const sse of readSse(bytes(text, every))) out.push(...mapper.push(JSON.parse(sse.data) as WireStreamEvent));
    mapper.end();
    return out;
  }

  it('the recorded forced-tool stream → content deltas of the JSON text, no tool-call delta, finish stop', async () => {
    const events = await runWith(fixture('stream-forced-tool.sse'), 'weather_report');
    expect(events).toEqual([
      { type: 'delta', index: 0, content: '{"city": "Par' },
      { type: 'delta', index: 0, content: 'is", "temp_c": 21}' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'usage', usage: { prompt_tokens: 40, completion_tokens: 25, total_tokens: 65 } },
    ]);
    expect(events.some((e) => e.type === 'delta' && e.tool_calls)).toBe(false);
    const text = events.map((e) => (e.type === 'delta' ? (e.content ?? '') : '')).join('');
    expect(JSON.parse(text)).toEqual({ city: 'Paris', temp_c: 21 });
  });

  it('without the response tool name the same stream is a tool call', async () => {
    const events = await runWith(fixture('stream-forced-tool.sse'), undefined);
    expect(events[0]).toMatchObject({ tool_calls: [{ index: 0, id: 'toolu_01Answer', function: { name: 'weather_report', arguments: '' } }] });
    expect(events.find((e) => e.type === 'finish')).toMatchObject({ finish_reason: 'tool_calls' });
  });

  it('an empty input streamed without fragments is the content {}; a client tool after it is numbered from 0', () => {
    const m = new AnthropicStreamMapper('answer');
    m.push(start);
    const out = [
      ...m.push({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'a', name: 'answer', input: {} } }),
      ...m.push({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '' } }),
      ...m.push({ type: 'content_block_stop', index: 0 }),
      ...m.push({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'b', name: 'lookup', input: {} } }),
      ...m.push({ type: 'message_delta', delta: { stop_reason: 'tool_use' } }),
      ...m.push({ type: 'message_stop' }),
    ];
    expect(out.slice(0, 2)).toEqual([
      { type: 'delta', index: 0, content: '{}' },
      { type: 'delta', index: 0, tool_calls: [{ index: 0, id: 'b', type: 'function', function: { name: 'lookup', arguments: '' } }] },
    ]);
    expect(out[2]).toEqual({ type: 'finish', index: 0, finish_reason: 'tool_calls' });
  });
});

describe('anthropic forced tool stream with a wrapped (non-object) answer', () => {
  it('holds the fragments and sends input.value whole at the block end', () => {
    const m = new AnthropicStreamMapper('list', true);
    m.push(start);
    const out = [
      ...m.push({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'a', name: 'list', input: {} } }),
      ...m.push({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"value": ["a",' } }),
      ...m.push({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: ' "b"]}' } }),
      ...m.push({ type: 'content_block_stop', index: 0 }),
      ...m.push({ type: 'message_delta', delta: { stop_reason: 'tool_use' } }),
      ...m.push({ type: 'message_stop' }),
    ];
    expect(out.slice(0, 2)).toEqual([
      { type: 'delta', index: 0, content: '["a","b"]' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
    ]);
  });
});
