import { UpstreamHttp, UpstreamResponse } from '../http/upstream-http';
import type {
  AdapterCapabilities, CallContext, ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, ProviderAdapter, StreamEvent, UpstreamTarget,
} from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { withTraceHeaders } from '../../telemetry/trace-context';
import { endpointFor, headersFor } from './openai.endpoint';
import { toWireEmbeddingRequest, toWireRequest } from './openai-request.mapper';
import { fromWireEmbeddings, fromWireResponse, statusError } from './openai-response.mapper';
import { readChatStream } from './openai.stream';
import type { WireChatCompletion, WireEmbeddingResponse } from './openai.wire';
import { capabilitiesFor, OpenAiCompatibleFamily, OpenAiVariant, variantOf } from './variants';

function parseJson<T>(text: string, what: string): T {
  try {
    // DeepSeek sends blank lines before the JSON while a request is queued; JSON.parse skips them.
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError('protocol', `the ${what} is not JSON (${text.length} bytes)`);
  }
}

/**
 * Every OpenAI-compatible family (openai, groq, azure, deepseek, mistral, together, openrouter,
 * vllm, ollama): one adapter, its differences declared in variants.ts. No retries or fallback here.
 */
export class OpenAiCompatibleAdapter implements ProviderAdapter {
  private readonly variant: OpenAiVariant;

  constructor(
    private readonly http: UpstreamHttp,
    family: OpenAiCompatibleFamily,
  ) {
    this.variant = variantOf(family);
  }

  capabilities(target: UpstreamTarget): AdapterCapabilities {
    return capabilitiesFor(this.variant, target);
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult> {
    const endpoint = endpointFor(ctx.target, this.variant, 'chat/completions');
    const body = toWireRequest(req, ctx.target, this.variant, { stream: false, modelInBody: endpoint.modelInBody });
    const res = await this.send(ctx, endpoint.url, body, false);
    return fromWireResponse(parseJson<WireChatCompletion>(await res.text(), 'response body'), this.variant);
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
    const endpoint = endpointFor(ctx.target, this.variant, 'chat/completions');
    const body = toWireRequest(req, ctx.target, this.variant, { stream: true, modelInBody: endpoint.modelInBody });
    const res = await this.send(ctx, endpoint.url, body, true);
    return readChatStream(res.body, this.variant);
  }

  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResult> {
    const endpoint = endpointFor(ctx.target, this.variant, 'embeddings');
    const body = toWireEmbeddingRequest(req, ctx.target, { modelInBody: endpoint.modelInBody });
    const res = await this.send(ctx, endpoint.url, body, false);
    return fromWireEmbeddings(parseJson<WireEmbeddingResponse>(await res.text(), 'embeddings body'), req.input.length);
  }

  private send(ctx: CallContext, url: string, body: unknown, stream: boolean): Promise<UpstreamResponse> {
    const { target } = ctx;
    return this.http.send({
      poolKey: target.provider.id,
      url,
      headers: withTraceHeaders(headersFor(target, this.variant, stream), ctx.trace),
      body,
      signal: ctx.signal,
      timeouts: target.timeouts,
      maxBytes: target.maxResponseBytes,
      stream,
      statusError,
    });
  }
}

export const createOpenAiCompatibleAdapter = (http: UpstreamHttp, family: OpenAiCompatibleFamily): ProviderAdapter =>
  new OpenAiCompatibleAdapter(http, family);
