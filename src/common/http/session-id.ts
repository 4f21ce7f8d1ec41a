import { GatewayError } from '../errors/gateway-error';

/**
 * The session id rule (docs/api.md "Request id and session id"): at most 128 characters of [A-Za-z0-9._:-]. One definition for the
 * `gateway-session-id` header of chat and the `session_id` of feedback (feedback names the session
 * by the id chat was sent), so the two can never disagree.
 */
const SESSION_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export const SESSION_ID_RULE = '1 to 128 characters of A-Z a-z 0-9 . _ : -';

export function isSessionId(value: unknown): value is string {
  return typeof value === 'string' && SESSION_ID.test(value);
}

/** The `gateway-session-id` header of chat and embeddings: null when absent, 400 when malformed. */
export function parseSessionId(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  if (!isSessionId(value)) {
    throw new GatewayError('invalid_request', `gateway-session-id must be ${SESSION_ID_RULE}`, { param: 'gateway-session-id' });
  }
  return value;
}
