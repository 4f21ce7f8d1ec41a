import { DEFAULT_TEXT, FakeResponse, FakeUpstream, pieces, RecordedRequest, Scenario } from './fake-upstream';

/** Anthropic's error `type` per HTTP status. */
const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorBody(status: number, message = `fake upstream error ${status}`) {
  const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  return { type: 'error', error: { type, message }, request_id: 'req_fake01' };
}

/** Splits tool arguments into a few `input_json_delta` fragments, as the API streams them. */
function fragments(json: string): string[] {
  const n = Math.max(1, Math.ceil(json.length / 3));
  const out: string[] = [];
  for (let i = 0; i < json.length; i += n) out.push(json.slice(i, i + n));
  return out;
}

/** One event's `data`; its `type` is also the `event:` name. */
type SseData = { type: string; [key: string]: unknown };

type Block =
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; arguments: string };

/**
 * A fake Anthropic Messages API on 127.0.0.1, rendering every Scenario
 * field in the real wire format: `POST /v1/messages`, JSON Messages or SSE with `event:` lines
 * (`message_start` with input usage, content blocks for thinking with a `signature_delta`, text,
 * tool_use with `input_json_delta` fragments, `message_delta` with the stop reason and cumulative
 * usage, `message_stop`), `ping` events for `heartbeats`, Anthropic's error body with `retry-after`,
 * an in-band `event: error` (overloaded_error, then the body ends), truncation (a stream body that
 * ends cleanly without `message_stop`; a JSON body cut half-way), and stalls. `usage: null` leaves
 * every usage object out. `usagePlacement` and `timing` are OpenAI/Groq-only and ignored here.
 *
 * It also checks what the real API checks, answering 4xx with Anthropic's error body: the
 * `x-api-key` and `anthropic-version` headers, `max_tokens` present, roles only user/assistant,
 * `system` a string or blocks, temperature in 0..1, and with thinking on a budget >= 1024 below
 * `max_tokens`, no temperature other than 1 and no forced tool use (`tool_choice` `any` or `tool`);
 * a forced `tool_choice` must name a listed tool; `output_config.format` must be a `json_schema`
 * with an object schema.
 *
 * Structured output as the API answers it: a forced tool (`tool_choice: {type: "tool", name}`, or
 * `any`, which the fake answers with the last listed tool) comes back, when the scenario has no tool
 * call of its own, as a `tool_use` block of that tool whose input is the scenario's text parsed as
 * JSON (`{}` without text), `stop_reason: tool_use`; with `output_config.format` the scenario's text
 * is the answer's text block.
 *
 * `heartbeats` sends Anthropic's own `event: ping` rather than the base class's comment lines, so
 * events are framed here and written through FakeResponse.write (which applies delivery/byte-split).
 */
export class AnthropicFake extends FakeUpstream {
  /** A scenario answering 529 overloaded_error before the stream (what Anthropic sends when overloaded). */
  static overloaded(retryAfter?: number): Scenario {
    return { errorStatus: 529, retryAfter };
  }

  protected async handle(req: RecordedRequest, s: Scenario, out: FakeResponse): Promise<void> {
    if (req.method !== 'POST' || req.path.split('?')[0] !== '/v1/messages') return this.fail(out, 404, `Not found: ${req.method} ${req.path}`);
    if (!req.headers['x-api-key']) return this.fail(out, 401, 'x-api-key header is required');
    if (!req.headers['anthropic-version']) return this.fail(out, 400, 'anthropic-version: header is required');
    const invalid = this.validate(req.body);
    if (invalid) return this.fail(out, 400, invalid);
    if (s.errorStatus) return this.fail(out, s.errorStatus, undefined, s.retryAfter);

    const blocks: Block[] = [];
    if (s.reasoning) blocks.push({ type: 'thinking', thinking: s.reasoning, signature: 'EqQBCkYIBxgCKkDfakeSignature==' });
    const forced = s.toolCall ? undefined : this.forcedTool(req.body);
    if (forced) s = { ...s, toolCall: { id: 'toolu_01Forced', name: forced, arguments: s.text ?? '{}' }, text: undefined };
    if (s.text !== undefined || !s.toolCall) blocks.push({ type: 'text', text: s.text ?? DEFAULT_TEXT });
    if (s.toolCall) blocks.push({ type: 'tool_use', id: s.toolCall.id ?? 'toolu_01Fake', name: s.toolCall.name, arguments: s.toolCall.arguments });
    const stopReason = s.finish === 'length' ? 'max_tokens' : s.finish === 'tool_calls' || (s.toolCall && !s.finish) ? 'tool_use' : 'end_turn';
    const words = blocks.reduce((n, b) => n + (b.type === 'tool_use' ? 4 : pieces(b.type === 'text' ? b.text : b.thinking).length), 0);
    const usage = s.usage === null ? undefined : (s.usage ?? { prompt: 12, completion: words });
    const model = typeof req.body.model === 'string' ? req.body.model : 'claude-fake';

    if (req.body.stream === true) await this.stream(out, s, blocks, stopReason, usage, model);
    else await this.message(out, s, blocks, stopReason, usage, model);
  }

  /** The tool a forced `tool_choice` makes the model call: the named one, or the last listed for `any`. */
  private forcedTool(body: any): string | undefined {
    const choice = body.tool_choice;
    if (choice?.type === 'tool') return choice.name;
    if (choice?.type === 'any' && Array.isArray(body.tools) && body.tools.length) return body.tools[body.tools.length - 1].name;
    return undefined;
  }

  private validate(body: any): string | undefined {
    if (body === null || typeof body !== 'object') return 'request body must be a JSON object';
    if (typeof body.model !== 'string' || body.model === '') return 'model: Field required';
    if (!Number.isInteger(body.max_tokens) || body.max_tokens < 0) return 'max_tokens: Field required';
    if (!Array.isArray(body.messages)) return 'messages: Field required';
    for (const [i, m] of body.messages.entries()) {
      if (m.role !== 'user' && m.role !== 'assistant') return `messages.${i}.role: Input should be 'user' or 'assistant'`;
      if (typeof m.content !== 'string' && !Array.isArray(m.content)) return `messages.${i}.content: Field required`;
    }
    if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system)) return 'system: Input should be a valid string';
    if (body.temperature !== undefined && (body.temperature < 0 || body.temperature > 1)) return 'temperature: Input should be less than or equal to 1';
    if (body.thinking?.type === 'enabled') {
      const budget = body.thinking.budget_tokens;
      if (!Number.isInteger(budget) || budget < 1024) return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
      if (budget >= body.max_tokens) return '`max_tokens` must be greater than `thinking.budget_tokens`';
    }
    if (body.thinking && body.thinking.type !== 'disabled' && body.temperature !== undefined && body.temperature !== 1) {
      return '`temperature` may only be set to 1 when thinking is enabled.';
    }
    const choice = body.tool_choice;
    if (body.thinking && body.thinking.type !== 'disabled' && (choice?.type === 'any' || choice?.type === 'tool')) {
      return 'Thinking may not be enabled when tool_choice forces tool use.';
    }
    if (choice?.type === 'tool' && !(body.tools ?? []).some((t: any) => t?.name === choice.name)) return `tool_choice: Tool '${choice.name}' not found in tools`;
    for (const [i, t] of (body.tools ?? []).entries()) {
      if (typeof t?.name !== 'string' || !/^[a-zA-Z0-9_-]{1,128}$/.test(t.name)) return `tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
      if (t.input_schema === null || typeof t.input_schema !== 'object' || t.input_schema.type !== 'object') return `tools.${i}.custom.input_schema.type: Input should be 'object'`;
    }
    const format = body.output_config?.format;
    if (format !== undefined && (format?.type !== 'json_schema' || format.schema === null || typeof format.schema !== 'object')) {
      return 'output_config.format: Input should be a valid json_schema format';
    }
    return undefined;
  }

  private fail(out: FakeResponse, status: number, message?: string, retryAfter?: number): void {
    const headers: Record<string, string> = { 'request-id': 'req_fake01' };
    if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
    out.json(status, anthropicErrorBody(status, message), headers);
  }

  private usageJson(usage: Scenario['usage'], final: boolean): Record<string, unknown> | undefined {
    if (!usage) return undefined;
    return {
      input_tokens: usage.prompt,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: final ? usage.completion : 1,
      ...(final && usage.reasoning !== undefined ? { output_tokens_details: { thinking_tokens: usage.reasoning } } : {}),
      service_tier: 'standard',
    };
  }

  private async message(out: FakeResponse, s: Scenario, blocks: Block[], stopReason: string, usage: Scenario['usage'], model: string): Promise<void> {
    const body = {
      id: 'msg_01Fake',
      type: 'message',
      role: 'assistant',
      model,
      content: blocks.map((b) =>
        b.type === 'tool_use' ? { type: 'tool_use', id: b.id, name: b.name, input: JSON.parse(b.arguments || '{}') } : b.type === 'text' ? { type: 'text', text: b.text, citations: null } : b,
      ),
      stop_reason: stopReason,
      stop_sequence: null,
      ...(usage ? { usage: this.usageJson(usage, true) } : {}),
    };
    const text = JSON.stringify(body);
    if (!s.truncate && !s.stallMs) return out.json(200, body, { 'request-id': 'req_fake01' });
    // Headers promise the whole body; half of it arrives, then silence or a cut connection.
    out.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'request-id': 'req_fake01' });
    const half = Math.floor(text.length / 2);
    out.res.write(text.slice(0, half));
    if (s.truncate) return out.cut();
    await out.stall();
    if (!out.closed) out.res.end(text.slice(half));
  }

  private async stream(out: FakeResponse, s: Scenario, blocks: Block[], stopReason: string, usage: Scenario['usage'], model: string): Promise<void> {
    const nl = s.lineEnding === 'crlf' ? '\r\n' : s.lineEnding === 'cr' ? '\r' : '\n';
    const dataPrefix = s.noSpaceAfterData ? 'data:' : 'data: ';
    let pending = '';
    const frame = (data: SseData) => `event: ${data.type}${nl}${dataPrefix}${JSON.stringify(data)}${nl}${nl}`;
    const flush = async () => {
      if (pending) await out.write(pending);
      pending = '';
    };
    const send = async (data: SseData) => {
      if (s.heartbeats) pending += frame({ type: 'ping' });
      pending += frame(data);
      if (s.delivery !== 'all-at-once') await flush();
    };

    out.startStream({ 'request-id': 'req_fake01' });
    await send({
      type: 'message_start',
      message: { id: 'msg_01Fake', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, ...(usage ? { usage: this.usageJson(usage, false) } : {}) },
    });

    let firstContent = true;
    /** After the first content event: the scenario's in-band error, cut or stall. Returns true when the stream is over. */
    const afterContent = async (): Promise<boolean> => {
      if (!firstContent) return false;
      firstContent = false;
      if (s.midStreamError) {
        await send({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
        await flush();
        out.end();
        return true;
      }
      if (s.truncate) {
        // The body ends cleanly (chunked terminator) without message_stop: only the end-marker check
        // can tell this from a finished stream, which is what the contract's truncation test is after.
        await flush();
        out.end();
        return true;
      }
      if (s.stallMs) {
        await flush();
        await out.stall();
      }
      return out.closed;
    };

    for (const [index, b] of blocks.entries()) {
      if (b.type === 'thinking') {
        await send({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        for (const p of pieces(b.thinking)) await send({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: p } });
        await send({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: b.signature } });
      } else if (b.type === 'text') {
        await send({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
        for (const p of pieces(b.text)) {
          await send({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: p } });
          if (await afterContent()) return;
        }
      } else {
        await send({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
        await send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } });
        for (const f of fragments(b.arguments)) {
          await send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: f } });
          if (await afterContent()) return;
        }
      }
      await send({ type: 'content_block_stop', index });
      if (out.closed) return;
    }
    await send({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, ...(usage ? { usage: this.usageJson(usage, true) } : {}) });
    await send({ type: 'message_stop' });
    await flush();
    out.end();
  }
}
