import { UpstreamHttp, UpstreamResponse } from '../http/upstream-http';
import type { AdapterCapabilities, CallContext, ChatRequest, ChatResult, ProviderAdapter, StreamEvent, UpstreamTarget } from '../provider-adapter';
import { readSse } from '../sse/sse-reader';
import { withTraceHeaders } from '../../telemetry/trace-context';
import { UpstreamError } from '../upstream-error';
import { DEFAULT_STRUCTURED_OUTPUT, structuredPlan, toMessagesRequest } from './anthropic-request.mapper';
import { errorTypeOf, toChatResult } from './anthropic-response.mapper';
import { AnthropicStreamMapper } from './anthropic-stream.mapper';
import type { WireResponse, WireStreamEvent } from './anthropic.wire';

export const ANTHROPIC_DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** The API version header value the official SDK still sends. */
export const ANTHROPIC_VERSION = '2023-06-01';

/** `POST {base}/v1/messages`; a base URL that already ends in `/v1` is accepted too. */
export function messagesUrl(baseUrl: string | undefined): string {
  const base = (baseUrl ?? ANTHROPIC_DEFAULT_BASE_URL).replace(/\/+$/, '');
  return /\/v1$/.test(base) ? `${base}/messages` : `${base}/v1/messages`;
}

/**
 * The `anthropic` family: the Messages API both ways. Mapping lives in the pure
 * `anthropic-*.mapper.ts` functions; this class only does the HTTP exchange and error mapping.
 */
export class AnthropicAdapter implements ProviderAdapter {
  constructor(private readonly http: UpstreamHttp) {}

  /**
   * Anthropic has no embeddings API, one choice per request, no seed,
   * and no native `json_object` mode: a system-prompt emulation would not guarantee JSON, so JSON
   * mode is declared unsupported and the chat layer refuses or skips the target. A JSON schema is
   * taken as the model's `structured_output` says (forced tool by default); the native
   * `output_config.format` refuses recursive schemas, the forced tool's `input_schema` does not.
   */
  capabilities(target: UpstreamTarget): AdapterCapabilities {
    const mode = target.structuredOutput ?? DEFAULT_STRUCTURED_OUTPUT;
    return {
      embeddings: false, tools: true, multipleChoices: false, seed: false, images: true, jsonMode: false,
      jsonSchema: mode === 'native' || mode === 'forced_tool',
      recursiveSchemas: mode === 'forced_tool',
    };
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult> {
    const res = await this.send(req, ctx, false);
    const text = await res.text();
    let msg: WireResponse;
    try {
      msg = JSON.parse(text) as WireResponse;
    } catch {
      throw new UpstreamError('protocol', 'anthropic: response body is not JSON');
    }
    const tool = responseToolOf(req, ctx);
    return toChatResult(msg, tool?.name, tool?.wrapped);
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
    const res = await this.send(req, ctx, true);
    const responseTool = responseToolOf(req, ctx);
    return (async function* () {
      const mapper = new AnthropicStreamMapper(responseTool?.name, responseTool?.wrapped);
      for await (const sse of readSse(res.body)) {
        let ev: WireStreamEvent;
        try {
          ev = JSON.parse(sse.data) as WireStreamEvent;
        } catch {
          throw new UpstreamError('protocol', `anthropic stream: event ${sse.event ?? '(unnamed)'} is not JSON`);
        }
        if (ev === null || typeof ev !== 'object' || typeof ev.type !== 'string') throw new UpstreamError('protocol', 'anthropic stream: event without a type');
        // Events after message_stop yield nothing; the body is still read to its end so the
        // keep-alive connection can be reused.
        yield* mapper.push(ev);
      }
      mapper.end();
    })();
  }

  private send(req: ChatRequest, ctx: CallContext, stream: boolean): Promise<UpstreamResponse> {
    const { provider } = ctx.target;
    const headers: Record<string, string> = { 'anthropic-version': ANTHROPIC_VERSION, ...provider.headers };
    if (provider.api_key) headers['x-api-key'] = provider.api_key.reveal();
    return this.http.send({
      poolKey: provider.id,
      url: messagesUrl(provider.base_url),
      headers: withTraceHeaders(headers, ctx.trace),
      body: toMessagesRequest(req, ctx.target, stream),
      signal: ctx.signal,
      timeouts: ctx.target.timeouts,
      maxBytes: ctx.target.maxResponseBytes,
      stream,
      ok: only200,
      statusError,
    });
  }
}

const only200 = (status: number) => status === 200;

/** The forced tool carrying this request's structured answer, if it has one on this target. */
function responseToolOf(req: ChatRequest, ctx: CallContext): { name: string; wrapped: boolean } | undefined {
  const plan = structuredPlan(req, ctx.target);
  return plan?.mode === 'forced_tool' ? { name: plan.tool, wrapped: plan.wrapped } : undefined;
}

function statusError(status: number, text: string, retryAfterMs: number | undefined): UpstreamError {
  const { type, message } = errorTypeOf(text);
  return new UpstreamError('status', `anthropic ${status} ${type ?? ''}: ${message ?? text.slice(0, 500)}`, { status, retryAfterMs, code: type });
}

export const createAnthropicAdapter = (http: UpstreamHttp): ProviderAdapter => new AnthropicAdapter(http);
