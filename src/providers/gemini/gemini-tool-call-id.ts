import { randomBytes } from 'node:crypto';

/**
 * Gemini returns no usable tool-call ids, and Gemini 3 wants each functionCall's `thoughtSignature`
 * back on the same part in the next request. OpenAI messages have
 * no slot for it, so the signature rides inside the synthesised id the client echoes back:
 * `call_<24 hex>` or `call_<24 hex>__ts_<number of '=' removed><signature as unpadded base64url>`.
 * Signatures are standard base64 (protobuf bytes in JSON), so the id is `[A-Za-z0-9_-]` only and
 * also passes Anthropic's tool-id pattern should the history later go to another family.
 */
const SEPARATOR = '__ts_';

export function makeToolCallId(thoughtSignature?: string): string {
  const base = `call_${randomBytes(12).toString('hex')}`;
  if (!thoughtSignature) return base;
  const padding = /=*$/.exec(thoughtSignature)![0].length;
  const body = padding <= 9 ? thoughtSignature.slice(0, thoughtSignature.length - padding) : thoughtSignature;
  return `${base}${SEPARATOR}${padding <= 9 ? padding : 0}${body.replace(/\+/g, '-').replace(/\//g, '_')}`;
}

/** The signature carried by an id made by `makeToolCallId`, as Gemini sent it. */
export function thoughtSignatureOf(id: string | undefined): string | undefined {
  const at = id?.indexOf(SEPARATOR) ?? -1;
  if (!id || at < 0) return undefined;
  const m = /^(\d)(.+)$/s.exec(id.slice(at + SEPARATOR.length));
  if (!m) return undefined;
  return m[2].replace(/-/g, '+').replace(/_/g, '/') + '='.repeat(Number(m[1]));
}
