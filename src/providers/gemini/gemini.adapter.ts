import { UpstreamHttp, UpstreamResponse } from '../http/upstream-http';
import type {
  AdapterCapabilities, CallContext, ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, ProviderAdapter, StreamEvent, UpstreamTarget,
} from '../provider-adapter';
import { readSse } from '../sse/sse-reader';
import { withTraceHeaders } from '../../telemetry/trace-context';
import { UpstreamError } from '../upstream-error';
import {
  DEFAULT_STRUCTURED_OUTPUT, embedBatches, toBatchEmbedContentsRequest, toEmbedContentRequest, toGenerateContentRequest,
} from './gemini-request.mapper';
import { fromEmbedResponses, fromGenerateContentResponse, GeminiStreamMapper, parseJson, toStatusError } from './gemini-response.mapper';
import type { GeminiBatchEmbedContentsResponse, GeminiEmbedContentResponse, GeminiGenerateContentResponse } from './gemini.wire';

export const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';

type Method = 'generateContent' | 'streamGenerateContent' | 'embedContent' | 'batchEmbedContents';

const only200 = (status: number) => status === 200;

const structuredOutputOf = (target: UpstreamTarget) => target.structuredOutput ?? DEFAULT_STRUCTURED_OUTPUT;

/**
 * The `gemini` family: Google's native Gemini API. The API key goes
 * in the `x-goog-api-key` header, never in the URL, so no logged URL carries it. Streams use
 * `alt=sse`; without it Google answers with one JSON array, which is also understood.
 */
export class GeminiAdapter implements ProviderAdapter {
  constructor(private readonly http: UpstreamHttp) {}

  /** JSON schemas as the model's `structured_output` says; the converted schema inlines `$ref`s, so it takes no recursive one. */
  capabilities(target: UpstreamTarget): AdapterCapabilities {
    const mode = structuredOutputOf(target);
    return {
      embeddings: true, tools: true, multipleChoices: true, seed: true, images: true, jsonMode: true,
      jsonSchema: mode === 'native' || mode === 'converted_schema',
      recursiveSchemas: mode === 'native',
    };
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult> {
    const res = await this.send(ctx, 'generateContent', toGenerateContentRequest(req, ctx.target.model.reasoning, structuredOutputOf(ctx.target)), false);
    return fromGenerateContentResponse(parseJson<GeminiGenerateContentResponse>(await res.text(), 'response'));
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
    const res = await this.send(ctx, 'streamGenerateContent', toGenerateContentRequest(req, ctx.target.model.reasoning, structuredOutputOf(ctx.target)), true);
    const contentType = String(res.headers['content-type'] ?? '');
    return (async function* () {
      const mapper = new GeminiStreamMapper();
      if (contentType.includes('json')) {
        // A JSON array (no alt=sse honoured) or a lone error object in place of the event stream.
        const parsed = parseJson<GeminiGenerateContentResponse | GeminiGenerateContentResponse[]>(await res.text(), 'stream');
        for (const fragment of Array.isArray(parsed) ? parsed : [parsed]) yield* mapper.push(fragment);
      } else {
        for await (const e of readSse(res.body)) yield* mapper.push(parseJson<GeminiGenerateContentResponse>(e.data, 'stream event'));
      }
      yield* mapper.end();
    })();
  }

  /**
   * One input → `:embedContent`, several → `:batchEmbedContents` (results come back in request
   * order), in consecutive batches of at most MAX_EMBED_BATCH (Google's cap per call), sent one after
   * another: Gemini's quota counts requests per minute, so parallel batches would only reach a 429
   * sooner, and with nothing else in flight a failure or a client abort stops the call before the
   * next batch. The whole call has one deadline, the target's total timeout, as a single call has:
   * each batch is one upstream call under the caller's signal and the target's timeouts, its total
   * cut to the time left, and running out is the single call's total timeout error. Any batch
   * failing fails the whole call with that batch's error (no partial result).
   * `outputDimensionality` is the request's `dimensions`, else the model's configured `dimensions`;
   * truncated vectors are renormalised. Usage is estimated (Gemini reports none), summed over batches.
   */
  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResult> {
    if (req.input.length === 0) return { embeddings: [], usage: { prompt_tokens: 0, total_tokens: 0 } };
    const dims = req.dimensions ?? ctx.target.model.dimensions;
    const renormalise = dims !== undefined;
    if (req.input.length === 1) {
      const res = await this.send(ctx, 'embedContent', toEmbedContentRequest(req.input[0], dims), false);
      return fromEmbedResponses(req.input, parseJson<GeminiEmbedContentResponse>(await res.text(), 'embedding response'), renormalise);
    }
    const result: EmbeddingResult = { embeddings: [], usage: { prompt_tokens: 0, total_tokens: 0 } };
    const { totalMs } = ctx.target.timeouts;
    const deadline = Date.now() + totalMs;
    const outOfTime = () => new UpstreamError('timeout', `no total within ${totalMs} ms`, { phase: 'total' });
    for (const input of embedBatches(req.input)) {
      if (ctx.signal.aborted) throw new UpstreamError('aborted', 'client went away');
      const left = deadline - Date.now();
      if (left <= 0) throw outOfTime();
      let body: GeminiBatchEmbedContentsResponse;
      try {
        const batch = toBatchEmbedContentsRequest({ ...req, input }, ctx.target.upstream, dims);
        const res = await this.send(ctx, 'batchEmbedContents', batch, false, { ...ctx.target.timeouts, totalMs: left });
        body = parseJson<GeminiBatchEmbedContentsResponse>(await res.text(), 'embedding response');
      } catch (err) {
        // The batch's own timer is the call's deadline: report it as the call's total, not the time left.
        if (err instanceof UpstreamError && err.kind === 'timeout' && err.opts.phase === 'total') throw outOfTime();
        throw err;
      }
      const part = fromEmbedResponses(input, body, renormalise);
      result.embeddings.push(...part.embeddings);
      result.usage.prompt_tokens += part.usage.prompt_tokens;
      result.usage.total_tokens += part.usage.total_tokens;
    }
    return result;
  }

  private send(ctx: CallContext, method: Method, body: unknown, stream: boolean, timeouts = ctx.target.timeouts): Promise<UpstreamResponse> {
    const { target } = ctx;
    const base = (target.provider.base_url ?? GEMINI_DEFAULT_BASE_URL).replace(/\/+$/, '');
    const model = encodeURIComponent(target.upstream.replace(/^models\//, ''));
    const headers: Record<string, string> = { ...target.provider.headers };
    if (target.provider.api_key) headers['x-goog-api-key'] = target.provider.api_key.reveal();
    if (stream) headers.accept = 'text/event-stream';
    return this.http.send({
      poolKey: target.provider.id,
      url: `${base}/models/${model}:${method}${stream ? '?alt=sse' : ''}`,
      headers: withTraceHeaders(headers, ctx.trace),
      body,
      signal: ctx.signal,
      timeouts,
      maxBytes: target.maxResponseBytes,
      stream,
      ok: only200,
      statusError: toStatusError,
    });
  }
}

export const createGeminiAdapter = (http: UpstreamHttp): ProviderAdapter => new GeminiAdapter(http);
