import { ChatCall, parseChatBody } from '../chat/chat-request';
import { GatewayError } from '../common/errors/gateway-error';
import { isObject } from '../common/http/body-checks';
import { isSessionId, SESSION_ID_RULE } from '../common/http/session-id';
import { sanitiseHeaders } from './header-sanitiser';

/** A validated explain body (docs/api.md "POST /v1/routing/explain"), headers already sanitised. */
export interface ExplainCall {
  call: ChatCall;
  /** The `headers` map without the reserved keys; empty when none was sent. */
  headers: Record<string, string>;
  /** `gateway-session-id` from `headers` (any casing), as the chat path would read it; null when absent. */
  sessionId: string | null;
}

const TOP_LEVEL = new Set(['request', 'headers']);
const SESSION_HEADER = 'gateway-session-id';

const invalid = (message: string, param?: string): GatewayError => new GatewayError('invalid_body', message, param ? { param } : {});

/**
 * Contract "POST /v1/routing/explain": unknown top-level keys, a `request` that is not a valid chat
 * body, or a `headers` that is not an object of strings are 400 `invalid_body`. The chat validator
 * is reused unchanged; its `invalid_request` is re-thrown as `invalid_body` with `param` under `request.`.
 */
export function parseExplainBody(body: unknown): ExplainCall {
  if (!isObject(body)) throw invalid('The request body must be a JSON object.');
  for (const key of Object.keys(body)) {
    if (!TOP_LEVEL.has(key)) throw invalid(`unknown field "${key}"; allowed: request, headers.`, key);
  }
  if (body.request === undefined) throw invalid('request is required.', 'request');
  if (!isObject(body.request)) throw invalid('request must be a chat completion body (a JSON object).', 'request');
  let call: ChatCall;
  try {
    call = parseChatBody(body.request);
  } catch (err) {
    throw asInvalidBody(err);
  }
  const headers = parseHeaders(body.headers);
  return { call, headers, sessionId: sessionIdOf(headers) };
}

/** Re-throws the chat validator's (or the routing chain's) request errors in explain's code. */
export function asInvalidBody(err: unknown): unknown {
  if (!(err instanceof GatewayError) || (err.code !== 'invalid_request' && err.code !== 'missing_template_input')) return err;
  const param = err.param ?? (err.code === 'missing_template_input' ? 'inputs' : undefined);
  return invalid(err.message, param ? `request.${param}` : 'request');
}

function parseHeaders(value: unknown): Record<string, string> {
  if (value === undefined) return {};
  if (!isObject(value)) throw invalid('headers must be an object whose values are strings.', 'headers');
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw invalid('every value in headers must be a string.', `headers.${key}`);
  }
  return sanitiseHeaders(value as Record<string, string>);
}

function sessionIdOf(headers: Record<string, string>): string | null {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === SESSION_HEADER);
  if (key === undefined) return null;
  if (!isSessionId(headers[key])) throw invalid(`${SESSION_HEADER} must be ${SESSION_ID_RULE}`, `headers.${key}`);
  return headers[key];
}
