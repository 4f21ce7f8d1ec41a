import pino, { DestinationStream, Logger } from 'pino';
import type { LogLevel } from '../../config/env';

/**
 * The process logger: pino JSON lines. Nothing here logs headers or bodies; the redact list is a
 * second line of defence for fields that must never appear (docs/architecture.md "No prompt text stored or logged").
 *
 * Standard output is written asynchronously (pino's default is one blocking write(2) per line, i.e.
 * per request): lines that arrive while a write is in flight go out together in the next one, and a
 * quiet gateway's lines still go out at once. pino flushes what is pending on process exit.
 */
/** The fields no log line may show, wherever they sit (redaction paths of pino). */
export const REDACT = {
  paths: ['authorization', 'headers.authorization', 'req.headers.authorization', 'apiKey', 'api_key', 'key', '*.apiKey', '*.api_key'],
  censor: '[redacted]',
};

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
    level,
    base: { service: 'gateway' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: REDACT,
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

export abstract class AppLogger {
  abstract readonly pino: Logger;
}
