import pino, { DestinationStream, Logger } from 'pino';
import type { LogLevel } from '../../config/env';
import { BatchedLineOutput } from './batched-line-output';

/**
 * The process logger: pino JSON lines. Nothing here logs headers or bodies; the redact list is a
 * second line of defence for fields that must never appear (docs/architecture.md "No prompt text stored or logged").
 *
 * Standard output gets its lines in one write per 20 ms, or right after the turn once 64 KiB are
 * pending (BatchedLineOutput: pino's default is one write(2) per line, its asynchronous destination a
 * trip through libuv's thread pool per write); what is pending is written on process exit.
 */
/** The fields no log line may show, wherever they sit (redaction paths of pino). */
export const REDACT = {
  paths: ['authorization', 'headers.authorization', 'req.headers.authorization', 'apiKey', 'api_key', 'key', '*.apiKey', '*.api_key'],
  censor: '[redacted]',
};

let stdoutOutput: BatchedLineOutput | undefined;

/** Standard output's one batcher, whatever number of loggers write to it (a CLI command makes several); written out on exit. */
function standardOutput(): BatchedLineOutput {
  if (stdoutOutput === undefined) {
    const out = new BatchedLineOutput();
    process.once('exit', () => out.flush());
    stdoutOutput = out;
  }
  return stdoutOutput;
}

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  if (destination === undefined) {
    const out = standardOutput();
    const logger = createLogger(level, out);
    out.onDropped = (lines) => logger.warn({ dropped_lines: lines }, 'log lines dropped: standard output was not being read');
    return logger;
  }
  return pino(
    {
    level,
    base: { service: 'gateway' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: REDACT,
    },
    destination,
  );
}

export abstract class AppLogger {
  abstract readonly pino: Logger;
}
