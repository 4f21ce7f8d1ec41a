/*
 * Kept apart from PgSqlStore so that the resilience layer can classify errors without loading `pg`,
 * which an embedded gateway never uses (stores load their client library only when configured).
 */

/* What `pg` says when the server cannot be reached, went away, or stopped answering. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const PG_OUTAGE_MESSAGES = [/^Connection terminated/, /timeout exceeded when trying to connect/, /^Query read timeout/, /not queryable/, /^Client was closed/];

/**
 * True when a call's error says the Postgres server cannot be reached or did not answer: a socket
 * error, a connection dropped or never made, `pg`'s own timeouts, SQLSTATE class 08 (connection
 * exception) or 57P01–57P03 (the server shutting down, crashed, or not yet accepting). False for
 * anything the server answered about the statement itself (a constraint, a statement timeout).
 */
export function isPostgresOutage(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (SOCKET_CODES.has(code)) return true;
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return true;
  }
  return PG_OUTAGE_MESSAGES.some((m) => m.test(err.message));
}
