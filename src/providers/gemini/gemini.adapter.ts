import { UpstreamHttp, UpstreamResponse } from '../http/upstream-http';
import type {
  AdapterCapabilities, CallContext, ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, ProviderAdapter, StreamEvent, UpstreamTarget,
} from '../provider-adapter';
import { readSse } from '../sse/sse-reader';
import { toBatchEmbedContentsRequest, toEmbedContentRequest, toGenerateContentRequest } from './gemini-request.mapper';
import { fromEmbedResponses, fromGenerateContentResponse, GeminiStreamMapper, parseJson, toStatusError } from './gemini-response.mapper';
import type { GeminiBatchEmbedContentsResponse, GeminiEmbedContentResponse, GeminiGenerateContentResponse } from './gemini.wire';

export const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';

type Method = 'generateContent' | 'streamGenerateContent' | 'embedContent' | 'batchEmbedContents';

/**
 * The `gemini` family: Google's native Gemini API (providers reference §3, issue 4). The API key goes
 * in the `x-goog-api-key` header, never in the URL, so no logged URL carries it. Streams use
 * `alt=sse`; without it Google answers with one JSON array, which is also understood.
 */
export class GeminiAdapter implements ProviderAdapter {
  constructor(private readonly http: UpstreamHttp) {}

  capabilities(_target: UpstreamTarget): AdapterCapabilities {
    return { embeddings: true, tools: true, multipleChoices: true, seed: true, images: true, jsonMode: true };
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult> {
    const res = await this.send(ctx, 'generateContent', toGenerateContentRequest(req, ctx.target.model.reasoning), false);
    return fromGenerateContentResponse(parseJson<GeminiGenerateContentResponse>(await UpstreamHttp.text(res.body), 'response'));
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
    const res = await this.send(ctx, 'streamGenerateContent', toGenerateContentRequest(req, ctx.target.model.reasoning), true);
    const contentType = String(res.headers['content-type'] ?? '');
    return (async function* () {
      const mapper = new GeminiStreamMapper();
      if (contentType.includes('json')) {
        // A JSON array (no alt=sse honoured) or a lone error object in place of the event stream (§3.4).
        const parsed = parseJson<GeminiGenerateContentResponse | GeminiGenerateContentResponse[]>(await UpstreamHttp.text(res.body), 'stream');
        for (const fragment of Array.isArray(parsed) ? parsed : [parsed]) yield* mapper.push(fragment);
      } else {
        for await (const e of readSse(res.body)) yield* mapper.push(parseJson<GeminiGenerateContentResponse>(e.data, 'stream event'));
      }
      yield* mapper.end();
    })();
  }

  /**
   * One input → `:embedContent`, several → `:batchEmbedContents` (results come back in request
   * order). `outputDimensionality` is the request's `dimensions`, else the model's configured
   * `dimensions`; truncated vectors are renormalised. Usage is estimated (Gemini reports none).
   */
  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResult> {
    if (req.input.length === 0) return { embeddings: [], usage: { prompt_tokens: 0, total_tokens: 0 } };
    const dims = req.dimensions ?? ctx.target.model.dimensions;
    const single = req.input.length === 1;
    const res = single
      ? await this.send(ctx, 'embedContent', toEmbedContentRequest(req.input[0], dims), false)
      : await this.send(ctx, 'batchEmbedContents', toBatchEmbedContentsRequest(req, ctx.target.upstream, dims), false);
    const body = parseJson<GeminiEmbedContentResponse | GeminiBatchEmbedContentsResponse>(await UpstreamHttp.text(res.body), 'embedding response');
    return fromEmbedResponses(req.input, body, dims !== undefined);
  }

  private async send(ctx: CallContext, method: Method, body: unknown, stream: boolean): Promise<UpstreamResponse> {
    const { target } = ctx;
    const base = (target.provider.baseUrl ?? GEMINI_DEFAULT_BASE_URL).replace(/\/+$/, '');
    const model = encodeURIComponent(target.upstream.replace(/^models\//, ''));
    const headers: Record<string, string> = { ...target.provider.headers };
    if (target.provider.apiKey) headers['x-goog-api-key'] = target.provider.apiKey.reveal();
    if (stream) headers.accept = 'text/event-stream';
    const res = await this.http.send({
      poolKey: target.provider.id,
      url: `${base}/models/${model}:${method}${stream ? '?alt=sse' : ''}`,
      headers,
      body,
      signal: ctx.signal,
      timeouts: target.timeouts,
      maxBytes: target.maxResponseBytes,
      stream,
    });
    if (res.status !== 200) throw toStatusError(res.status, await UpstreamHttp.errorText(res.body), res.retryAfterMs);
    return res;
  }
}

export const createGeminiAdapter = (http: UpstreamHttp): ProviderAdapter => new GeminiAdapter(http);
