import type { EmbeddingResult } from '../providers/provider-adapter';
import type { EncodingFormat } from './embeddings-request';

export interface EmbeddingsResponseBody {
  object: 'list';
  data: { object: 'embedding'; embedding: number[] | string; index: number }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/**
 * A vector as packed little-endian float32, base64-encoded: what OpenAI returns for
 * `encoding_format: base64` and what its SDKs decode. Written with writeFloatLE, so the byte order
 * does not depend on the host's.
 */
export function float32Base64(v: readonly number[]): string {
  const buf = Buffer.allocUnsafe(v.length * 4);
  for (let i = 0; i < v.length; i++) buf.writeFloatLE(v[i], i * 4);
  return buf.toString('base64');
}

/**
 * The contract's "Embedding response": one entry per input in request order, `index` matching;
 * `model` is the catalogue id that served. The gateway encodes base64 itself whatever the upstream
 * sent (the adapters always return numbers).
 */
export function embeddingsBody(model: string, result: EmbeddingResult, format: EncodingFormat): EmbeddingsResponseBody {
  return {
    object: 'list',
    data: result.embeddings.map((v, index) => ({ object: 'embedding', embedding: format === 'base64' ? float32Base64(v) : v, index })),
    model,
    usage: { prompt_tokens: result.usage.prompt_tokens, total_tokens: result.usage.total_tokens },
  };
}

/**
 * Embeddings' "model not supported": this body, not the gateway's standard error body (docs/api.md
 * "Error body").
 */
export function modelNotSupportedBody(message: string): { error: { message: string; type: 'invalid_request_error'; code: 'model_not_found'; param: 'model' } } {
  return { error: { message, type: 'invalid_request_error', code: 'model_not_found', param: 'model' } };
}
