import { ownValue } from '../../common/own-key';
import type { ChatResult, FinishReason, ToolCall, Usage } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import type { WireErrorBody, WireResponse, WireUsage } from './anthropic.wire';

/**
 * `stop_reason` → `finish_reason`. `pause_turn` (a long server-tool turn
 * the client may resume) is a normal stop, as Portkey maps it; a missing or unknown reason is `stop`.
 */
export function toFinishReason(reason: string | null | undefined): FinishReason {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/**
 * Anthropic usage → the gateway's. `input_tokens` excludes cached input,
 * so prompt_tokens = input + cache creation + cache read, matching OpenAI where prompt_tokens
 * includes cached tokens. `output_tokens` already includes thinking; `thinking_tokens`, when the
 * upstream reports it, becomes reasoning_tokens.
 */
export function toUsage(u: WireUsage): Usage {
  const prompt = (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);
  const completion = u.output_tokens ?? 0;
  const thinking = u.output_tokens_details?.thinking_tokens;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, ...(typeof thinking === 'number' ? { reasoning_tokens: thinking } : {}) };
}

/**
 * A Message → one choice: text blocks joined, thinking text as `reasoning_content`, tool_use blocks
 * as tool calls. `responseTool` names the forced tool that carries a `response_format: json_schema`
 * answer: its input becomes the message content as JSON text (and the only content: a preamble
 * would make it unparseable), it is never a tool call, and a stop for it is `stop`. `wrapped`: the
 * answer schema was not an object, so the tool's input is `{value: answer}`.
 */
export function toChatResult(msg: WireResponse, responseTool?: string, wrapped = false): ChatResult {
  if (msg === null || typeof msg !== 'object' || !Array.isArray(msg.content)) throw new UpstreamError('protocol', 'anthropic: response is not a Message');
  let text = '';
  let hasText = false;
  let answer: string | undefined;
  let reasoning = '';
  const toolCalls: ToolCall[] = [];
  for (const block of msg.content) {
    if (block.type === 'text') {
      text += (block as { text: string }).text;
      hasText = true;
    } else if (block.type === 'thinking') reasoning += (block as { thinking: string }).thinking ?? '';
    else if (block.type === 'tool_use') {
      const b = block as { id: string; name: string; input: unknown };
      if (responseTool !== undefined && b.name === responseTool && answer === undefined) {
        answer = JSON.stringify(wrapped ? ((b.input ?? {}) as { value?: unknown }).value ?? null : (b.input ?? {}));
      }
      else toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    }
  }
  if (answer !== undefined) {
    text = answer;
    hasText = true;
  }
  const message: ChatResult['choices'][number]['message'] = { role: 'assistant', content: hasText || toolCalls.length === 0 ? text : null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  if (reasoning) message.reasoning_content = reasoning;
  let finish = toFinishReason(msg.stop_reason);
  if (finish === 'tool_calls' && toolCalls.length === 0) finish = 'stop';
  return {
    choices: [{ index: 0, message, finish_reason: finish }],
    ...(msg.usage ? { usage: toUsage(msg.usage) } : {}),
  };
}

/** HTTP status Anthropic uses for each error type; used for in-band stream errors. */
const STATUS_OF_ERROR_TYPE: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** The `error.type` of an Anthropic error body, if the text is one. */
export function errorTypeOf(text: string): { type?: string; message?: string } {
  try {
    const body = JSON.parse(text) as Partial<WireErrorBody>;
    return { type: body?.error?.type, message: body?.error?.message };
  } catch {
    return {};
  }
}

/** An in-band `event: error` (after the 200) as the normalised error; the provider message stays in `detail`. */
export function streamError(error: { type?: string; message?: string } | undefined): UpstreamError {
  const type = error?.type ?? 'unknown_error';
  return new UpstreamError('status', `anthropic stream error ${type}: ${error?.message ?? ''}`, { status: ownValue(STATUS_OF_ERROR_TYPE, type) ?? 500, code: type });
}
