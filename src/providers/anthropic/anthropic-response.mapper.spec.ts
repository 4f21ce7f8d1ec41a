import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UpstreamError } from '../upstream-error';
import { errorTypeOf, streamError, toChatResult, toFinishReason, toUsage } from './anthropic-response.mapper';
import type { WireResponse } from './anthropic.wire';

const fixture = (name: string) => readFileSync(join(__dirname, 'fixtures', name), 'utf8');
const recorded = (): WireResponse => JSON.parse(fixture('message-thinking-tool.json'));

describe('anthropic response mapping', () => {
  it('maps the recorded Message: text, thinking as reasoning_content, tool_use as tool calls, usage', () => {
    expect(toChatResult(recorded())).toEqual({
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'Hello!',
            reasoning_content: 'Let me think…',
            tool_calls: [{ id: 'toolu_01XYZ', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
          },
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42, reasoning_tokens: 14 },
    });
  });

  it('joins several text blocks; content is null when only tool calls came back; unknown blocks are ignored', () => {
    const msg = recorded();
    msg.content = [{ type: 'text', text: 'a' }, { type: 'server_tool_use', id: 'x' }, { type: 'redacted_thinking', data: 'zz' }, { type: 'text', text: 'b' }];
    msg.stop_reason = 'end_turn';
    expect(toChatResult(msg).choices[0].message).toEqual({ role: 'assistant', content: 'ab' });
    msg.content = [{ type: 'tool_use', id: 't', name: 'f', input: {} }];
    expect(toChatResult(msg).choices[0].message).toMatchObject({ content: null, tool_calls: [{ function: { name: 'f', arguments: '{}' } }] });
  });

  it('no usage object → no usage; a body that is not a Message is a protocol error', () => {
    const msg = recorded();
    delete msg.usage;
    expect(toChatResult(msg)).not.toHaveProperty('usage');
    expect(() => toChatResult({ type: 'error' } as never)).toThrow(UpstreamError);
  });

  it.each([
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['max_tokens', 'length'],
    ['tool_use', 'tool_calls'],
    ['pause_turn', 'stop'],
    ['refusal', 'content_filter'],
    ['model_context_window_exceeded', 'length'],
    [null, 'stop'],
    ['something_new', 'stop'],
  ])('stop_reason %s → finish_reason %s', (reason, finish) => {
    expect(toFinishReason(reason)).toBe(finish);
  });

  it('prompt_tokens includes cache creation and cache read tokens', () => {
    expect(toUsage({ input_tokens: 10, cache_creation_input_tokens: 200, cache_read_input_tokens: 3000, output_tokens: 50 })).toEqual({
      prompt_tokens: 3210,
      completion_tokens: 50,
      total_tokens: 3260,
    });
  });

  it('reasoning_tokens only when the upstream reports thinking tokens (older responses lack them)', () => {
    expect(toUsage({ input_tokens: 1, output_tokens: 9, output_tokens_details: { thinking_tokens: 4 } })).toEqual({ prompt_tokens: 1, completion_tokens: 9, total_tokens: 10, reasoning_tokens: 4 });
    expect(toUsage({ input_tokens: 1, output_tokens: 9, output_tokens_details: null, cache_read_input_tokens: null })).not.toHaveProperty('reasoning_tokens');
  });

  it('reads the error type from the recorded error body', () => {
    expect(errorTypeOf(fixture('error-rate-limit.json'))).toEqual({ type: 'rate_limit_error', message: 'This request would exceed …' });
    expect(errorTypeOf('<html>bad gateway</html>')).toEqual({});
  });

  it.each([
    ['overloaded_error', 529],
    ['api_error', 500],
    ['rate_limit_error', 429],
    ['invalid_request_error', 400],
    ['mystery_error', 500],
  ])('an in-band %s is a status error %i with that code', (type, status) => {
    const err = streamError({ type, message: 'm' });
    expect([err.kind, err.status, err.opts.code]).toEqual(['status', status, type]);
  });
});

describe('anthropic structured output: the forced response tool unwrapped', () => {
  const forced = (): WireResponse => JSON.parse(fixture('message-forced-tool.json'));

  it('the recorded forced-tool Message → JSON content, no tool calls, finish stop', () => {
    const r = toChatResult(forced(), 'weather_report');
    expect(r.choices).toEqual([{ index: 0, message: { role: 'assistant', content: '{"city":"Paris","temp_c":21,"tags":["sunny"]}' }, finish_reason: 'stop' }]);
    expect(JSON.parse(r.choices[0].message.content!)).toEqual({ city: 'Paris', temp_c: 21, tags: ['sunny'] });
    expect(r.usage).toEqual({ prompt_tokens: 40, completion_tokens: 25, total_tokens: 65 });
  });

  it('without the response tool name the same Message is an ordinary tool call', () => {
    expect(toChatResult(forced()).choices[0]).toMatchObject({ message: { content: null, tool_calls: [{ function: { name: 'weather_report' } }] }, finish_reason: 'tool_calls' });
  });

  it('a preamble is dropped (the content must parse), thinking is kept, a client tool call beside it stays a tool call', () => {
    const msg = forced();
    msg.content = [
      { type: 'thinking', thinking: 'Let me fill it in.', signature: 's' },
      { type: 'text', text: 'Here you go:' },
      { type: 'tool_use', id: 't1', name: 'weather_report', input: { city: 'Oslo' } },
      { type: 'tool_use', id: 't2', name: 'get_time', input: {} },
    ];
    const r = toChatResult(msg, 'weather_report');
    expect(r.choices[0]).toEqual({
      index: 0,
      message: { role: 'assistant', content: '{"city":"Oslo"}', reasoning_content: 'Let me fill it in.', tool_calls: [{ id: 't2', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
      finish_reason: 'tool_calls',
    });
  });
});

describe('anthropic forced tool with a wrapped (non-object) answer', () => {
  it('unwraps input.value into the content', () => {
    const msg: WireResponse = { id: 'm', type: 'message', role: 'assistant', model: 'c', content: [{ type: 'tool_use', id: 't', name: 'list', input: { value: ['a', 'b'] } }], stop_reason: 'tool_use' };
    expect(toChatResult(msg, 'list', true).choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: '["a","b"]' }, finish_reason: 'stop' });
  });
});
