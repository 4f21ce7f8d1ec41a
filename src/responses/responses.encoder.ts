import { randomUUID } from 'node:crypto';
import type { Response as ExpressResponse } from 'express';
import type { GatewayRequest } from '../common/http/request-context';
import type { SseEncoder, StreamBrokenError } from '../common/http/responder';
import { respondAnswer } from '../chat/chat.encoder';
import { usageHeaders } from '../chat/chat.mapper';
import type { ChatAnswer } from '../chat/chat.service';
import type { ChatChoice, FinishReason, StreamEvent, ToolCallDelta, Usage, UpstreamTiming } from '../providers/provider-adapter';
import type { ResponsesEcho } from './responses-request';

/** One Response: its id (item ids derive from it, so they stay unique without a UUID each), creation time and the catalogue model that served. */
export interface ResponseIdentity {
  id: string;
  created_at: number;
  model: string;
}

export function responseIdentity(model: string): ResponseIdentity {
  return { id: `resp_${randomUUID().replace(/-/g, '')}`, created_at: Math.floor(Date.now() / 1000), model };
}

const itemSuffix = (idn: ResponseIdentity) => idn.id.slice(5);

type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** The finish reasons that leave an answer cut short, as the Responses API names them. */
function incompleteReason(finish: FinishReason | undefined): 'max_output_tokens' | 'content_filter' | null {
  if (finish === 'length') return 'max_output_tokens';
  if (finish === 'content_filter') return 'content_filter';
  return null;
}

export function responsesUsage(usage: Usage | undefined): Record<string, unknown> {
  const u = usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  return {
    input_tokens: u.prompt_tokens,
    // No family reports cached input tokens through the gateway's usage; 0 says "none known".
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
    total_tokens: u.total_tokens,
  };
}

/**
 * The Response object (OpenAI's `Response` type: every field it marks required, the request's
 * settings echoed back). `store` is false: the gateway keeps nothing.
 */
export function responseBody(
  idn: ResponseIdentity,
  echo: ResponsesEcho,
  status: Status,
  output: Array<Record<string, unknown>>,
  opts: { usage?: Usage | null; finish?: FinishReason; error?: { code: string; message: string } } = {},
): Record<string, unknown> {
  const reason = status === 'incomplete' ? incompleteReason(opts.finish) : null;
  let text = '';
  for (const item of output) {
    if (item.type !== 'message') continue;
    for (const part of item.content as Array<{ type: string; text?: string }>) if (part.type === 'output_text') text += part.text;
  }
  const body: Record<string, unknown> = {
    id: idn.id,
    object: 'response',
    created_at: idn.created_at,
    status,
    background: false,
    error: opts.error ?? null,
    incomplete_details: reason ? { reason } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    model: idn.model,
    output,
    output_text: text,
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: null,
    reasoning: echo.reasoning,
    store: false,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_p: echo.top_p,
    truncation: 'disabled',
    usage: opts.usage === null ? null : responsesUsage(opts.usage),
    metadata: echo.metadata,
  };
  if (echo.user !== undefined) body.user = echo.user;
  return body;
}

const reasoningItem = (id: string, text: string, status: Status) => ({ id, type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text }], status });
const outputText = (text: string) => ({ type: 'output_text', annotations: [], logprobs: [], text });
const messageItem = (id: string, text: string, status: Status) => ({ id, type: 'message', status, content: [outputText(text)], role: 'assistant' });
const callItem = (id: string, callId: string, name: string, args: string, status: Status) => ({ id, type: 'function_call', status, arguments: args, call_id: callId, name });

/** A chat answer's first choice as Response output items: reasoning, then the message, then the function calls. */
export function outputItems(idn: ResponseIdentity, choice: ChatChoice | undefined, status: Status): Array<Record<string, unknown>> {
  const items: Array<Record<string, unknown>> = [];
  if (!choice) return items;
  const sfx = itemSuffix(idn);
  const m = choice.message;
  if (m.reasoning_content) items.push(reasoningItem(`rs_${sfx}`, m.reasoning_content, 'completed'));
  const calls = m.tool_calls ?? [];
  if (m.content || calls.length === 0) items.push(messageItem(`msg_${sfx}`, m.content ?? '', status));
  calls.forEach((c, i) => items.push(callItem(`fc_${sfx}_${i}`, c.id, c.function.name, c.function.arguments, 'completed')));
  return items;
}

export function jsonResponseBody(idn: ResponseIdentity, echo: ResponsesEcho, choice: ChatChoice | undefined, usage: Usage | undefined): Record<string, unknown> {
  const status: Status = incompleteReason(choice?.finish_reason) ? 'incomplete' : 'completed';
  return responseBody(idn, echo, status, outputItems(idn, choice, status), { usage, finish: choice?.finish_reason });
}

/** An output item being streamed; its text (or arguments) grows with each delta. */
interface OpenItem {
  kind: 'reasoning' | 'message' | 'function_call';
  id: string;
  index: number;
  text: string;
  callId: string;
  name: string;
  done: boolean;
}

/**
 * The Responses API's SSE stream from the chat pipeline's events: `response.created`,
 * `response.in_progress`, then per output item `response.output_item.added`, its content part and
 * deltas (`response.reasoning_text.*`, `response.output_text.*`, `response.function_call_arguments.*`)
 * and `response.output_item.done`, and finally `response.completed` or `response.incomplete`. Every
 * event carries the next `sequence_number`. A failure after the first byte is `response.failed`, and
 * the stream closes without `response.completed`.
 */
export class ResponsesSseEncoder implements SseEncoder<StreamEvent> {
  private seq = 0;
  private started = false;
  private readonly items: OpenItem[] = [];
  /** The open reasoning or message item (function calls stay open until the end: their deltas may interleave). */
  private current: OpenItem | undefined;
  private readonly calls = new Map<number, OpenItem>();
  private finish?: FinishReason;
  private usage?: Usage;
  private timing?: UpstreamTiming;
  private readonly sfx: string;

  constructor(
    private readonly idn: ResponseIdentity,
    private readonly echo: ResponsesEcho,
  ) {
    this.sfx = itemSuffix(idn);
  }

  private sse(type: string, fields: Record<string, unknown>): string {
    const seq = this.seq++;
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq, ...fields })}\n\n`;
  }

  private start(): string {
    this.started = true;
    const response = responseBody(this.idn, this.echo, 'in_progress', [], { usage: null });
    return this.sse('response.created', { response }) + this.sse('response.in_progress', { response });
  }

  event(e: StreamEvent): string | undefined {
    let out = this.started ? '' : this.start();
    if (e.type === 'usage') {
      this.usage = e.usage;
      this.timing = e.timing;
    } else if (e.type === 'finish') {
      if (e.index === 0) this.finish = e.finish_reason;
    } else if (e.index === 0) {
      if (e.reasoning) out += this.text('reasoning', e.reasoning);
      if (e.content) out += this.text('message', e.content);
      if (e.tool_calls) for (const c of e.tool_calls) out += this.call(c);
    }
    return out === '' ? undefined : out;
  }

  private open(kind: OpenItem['kind'], id: string, callId = '', name = ''): OpenItem {
    const item: OpenItem = { kind, id, index: this.items.length, text: '', callId, name, done: false };
    this.items.push(item);
    return item;
  }

  private text(kind: 'reasoning' | 'message', delta: string): string {
    let out = '';
    let item = this.current;
    if (item?.kind !== kind) {
      if (item) out += this.close(item, 'completed');
      item = this.current = this.open(kind, `${kind === 'reasoning' ? 'rs' : 'msg'}_${this.sfx}_${this.items.length}`);
      const added = kind === 'reasoning' ? reasoningItem(item.id, '', 'in_progress') : messageItem(item.id, '', 'in_progress');
      added.content = [];
      out += this.sse('response.output_item.added', { output_index: item.index, item: added });
      const part = kind === 'reasoning' ? { type: 'reasoning_text', text: '' } : outputText('');
      out += this.sse('response.content_part.added', { item_id: item.id, output_index: item.index, content_index: 0, part });
    }
    item.text += delta;
    return kind === 'reasoning'
      ? out + this.sse('response.reasoning_text.delta', { item_id: item.id, output_index: item.index, content_index: 0, delta })
      : out + this.sse('response.output_text.delta', { item_id: item.id, output_index: item.index, content_index: 0, delta, logprobs: [] });
  }

  private call(c: ToolCallDelta): string {
    let out = '';
    let item = this.calls.get(c.index);
    if (!item) {
      if (this.current) out += this.close(this.current, 'completed');
      this.current = undefined;
      item = this.open('function_call', `fc_${this.sfx}_${this.items.length}`, c.id ?? '', c.function?.name ?? '');
      this.calls.set(c.index, item);
      out += this.sse('response.output_item.added', { output_index: item.index, item: callItem(item.id, item.callId, item.name, '', 'in_progress') });
    } else {
      if (c.id && !item.callId) item.callId = c.id;
      if (c.function?.name && !item.name) item.name = c.function.name;
    }
    const delta = c.function?.arguments;
    if (!delta) return out;
    item.text += delta;
    return out + this.sse('response.function_call_arguments.delta', { item_id: item.id, output_index: item.index, delta });
  }

  private finished(item: OpenItem, status: Status): Record<string, unknown> {
    if (item.kind === 'reasoning') return reasoningItem(item.id, item.text, status === 'incomplete' ? 'incomplete' : 'completed');
    if (item.kind === 'message') return messageItem(item.id, item.text, status);
    return callItem(item.id, item.callId, item.name, item.text, 'completed');
  }

  private close(item: OpenItem, status: Status): string {
    item.done = true;
    const at = { item_id: item.id, output_index: item.index };
    let out = '';
    if (item.kind === 'reasoning') {
      out += this.sse('response.reasoning_text.done', { ...at, content_index: 0, text: item.text });
      out += this.sse('response.content_part.done', { ...at, content_index: 0, part: { type: 'reasoning_text', text: item.text } });
    } else if (item.kind === 'message') {
      out += this.sse('response.output_text.done', { ...at, content_index: 0, text: item.text, logprobs: [] });
      out += this.sse('response.content_part.done', { ...at, content_index: 0, part: outputText(item.text) });
    } else {
      out += this.sse('response.function_call_arguments.done', { ...at, arguments: item.text, name: item.name });
    }
    return out + this.sse('response.output_item.done', { output_index: item.index, item: this.finished(item, status) });
  }

  end(): string {
    let out = this.started ? '' : this.start();
    const status: Status = incompleteReason(this.finish) ? 'incomplete' : 'completed';
    for (const item of this.items) if (!item.done) out += this.close(item, status);
    const response = responseBody(this.idn, this.echo, status, this.items.map((i) => this.finished(i, status)), { usage: this.usage, finish: this.finish });
    return out + this.sse(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
  }

  failed(err: StreamBrokenError): string {
    const output = this.items.map((i) => this.finished(i, i.done ? 'completed' : 'in_progress'));
    const response = responseBody(this.idn, this.echo, 'failed', output, { usage: this.usage ?? null, error: { code: 'server_error', message: err.message } });
    return (this.started ? '' : this.start()) + this.sse('response.failed', { response });
  }

  trailers(): Record<string, string> {
    return usageHeaders(this.usage, this.timing);
  }
}

/** Writes the chat pipeline's answer as the Responses API: a Response object or its SSE event stream, with the `Gateway-*` headers. */
export function respondResponses(req: GatewayRequest, res: ExpressResponse, answer: ChatAnswer, echo: ResponsesEcho, signal: AbortSignal): Promise<void> | void {
  const idn = responseIdentity(answer.served.target.model);
  return respondAnswer(req, res, answer, signal, { body: (r) => jsonResponseBody(idn, echo, r.choices[0], r.usage), encoder: () => new ResponsesSseEncoder(idn, echo) });
}
