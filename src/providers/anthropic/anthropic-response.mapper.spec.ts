import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UpstreamError } from '../upstream-error';
import { errorTypeOf, streamError, toChatResult, toFinishReason, toUsage } from './anthropic-response.mapper';
import type { WireResponse } from './anthropic.wire';

const fixture = (name: string) => readFileSync(join(__dirname, '__fixtures__', name), 'utf8');
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
