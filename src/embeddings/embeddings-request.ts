import { absent, fail, int, isObject, str, typeName } from '../common/http/body-checks';
import type { EmbeddingRequest } from '../providers/provider-adapter';

export type EncodingFormat = 'float' | 'base64';

/** A validated embeddings body: the normalised request for the adapters plus what the gateway consumes. */
export interface EmbeddingsCall {
  model: string;
  encodingFormat: EncodingFormat;
  request: EmbeddingRequest;
}

/**
 * Caps of one request (docs/api.md "POST /v1/embeddings"; the route's 4 MiB body cap applies first):
 * - 2048 inputs: OpenAI's own per-request limit, the largest of the families served.
 * - 1 MiB of input text in total (UTF-8 bytes), so one request cannot fan out into an unbounded
 *   upstream body; about 250k tokens, above every family's per-request token limit anyway.
 * - `dimensions` at most 16384: above every embedding model offered today (OpenAI and Gemini 3072)
 *   and pgvector's 16000, and it bounds the response a request can ask for.
 */
export const MAX_INPUTS = 2048;
export const MAX_INPUT_BYTES = 1024 * 1024;
export const MAX_DIMENSIONS = 16_384;

const KNOWN = new Set(['model', 'input', 'dimensions', 'encoding_format', 'user']);
const FORMATS: readonly EncodingFormat[] = ['float', 'base64'];

/** The texts to embed: each a non-empty string (every family refuses an empty one). */
function inputs(v: unknown): string[] {
  if (typeof v === 'string') return [str(v, 'input', { nonEmpty: true })];
  if (!Array.isArray(v)) return fail('input', `input must be a string or an array of strings, got ${typeName(v)}.`);
  if (v.length === 0) return fail('input', 'input must not be an empty array.');
  if (v.length > MAX_INPUTS) return fail('input', `input must have at most ${MAX_INPUTS} entries, got ${v.length}.`);
  // Token arrays (which OpenAI's own API also takes) are not part of the contract: refused here.
  return v.map((x, i) => str(x, `input.${i}`, { nonEmpty: true }));
}

/**
 * Validation of the embeddings body (docs/api.md "POST /v1/embeddings"): every field, and
 * nothing else. Hand-written like the chat body's. The first failure is 400 `invalid_request` with
 * `param`; no provider is called.
 */
export function parseEmbeddingsBody(body: unknown): EmbeddingsCall {
  if (!isObject(body)) return fail('body', 'The request body must be a JSON object.');
  for (const k of Object.keys(body)) {
    if (!KNOWN.has(k)) return fail(k, `${k} is not a supported field.`);
  }
  if (typeof body.model !== 'string') return fail('model', `model must be a string, got ${typeName(body.model)}.`);
  if (body.model.length === 0 || body.model.length > 1024) return fail('model', 'model must be 1 to 1024 characters.');
  if (body.input === undefined) return fail('input', 'input is required.');
  const input = inputs(body.input);
  let bytes = 0;
  for (const t of input) bytes += Buffer.byteLength(t, 'utf8');
  if (bytes > MAX_INPUT_BYTES) return fail('input', `input must hold at most ${MAX_INPUT_BYTES} bytes of text in total, got ${bytes}.`);

  const request: EmbeddingRequest = { input };
  const dimensions = int(body, 'dimensions', 1, MAX_DIMENSIONS);
  if (dimensions !== undefined) request.dimensions = dimensions;
  let encodingFormat: EncodingFormat = 'float';
  if (!absent(body.encoding_format)) {
    if (!FORMATS.includes(body.encoding_format as EncodingFormat)) return fail('encoding_format', 'encoding_format must be float or base64.');
    encodingFormat = body.encoding_format as EncodingFormat;
  }
  if (!absent(body.user)) request.user = str(body.user, 'user', { max: 256 });
  return { model: body.model, encodingFormat, request };
}
