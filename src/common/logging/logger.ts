import pino, { DestinationStream, Logger } from 'pino';
import type { LogLevel } from '../../config/env';

/**
 * The process logger: pino JSON lines. Nothing here logs headers or bodies; the redact list is a
 * second line of defence for fields that must never appear (DESIGN §9).
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
    level,
    base: { service: 'gateway' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: {
      paths: ['authorization', 'headers.authorization', 'req.headers.authorization', 'apiKey', 'api_key', 'key', '*.apiKey', '*.api_key'],
      censor: '[redacted]',
    },
    },
    destination,
  );
}

export abstract class AppLogger {
  abstract readonly pino: Logger;
}
