import pino, { type Level } from 'pino';
import type { AppLogger } from '../../../src/common/logging/logger';

export interface MemoryLogger {
  /** What a service takes as its AppLogger. */
  logger: AppLogger;
  /** Every line written at `level` or above, parsed (to assert what is and is not logged). */
  lines: Record<string, unknown>[];
}

/** A pino logger that keeps its lines in memory instead of writing them out. */
export function memoryLogger(level: Level = 'info'): MemoryLogger {
  const lines: Record<string, unknown>[] = [];
  return { logger: { pino: pino({ level }, { write: (s: string) => void lines.push(JSON.parse(s)) }) }, lines };
}

/** A logger that writes nothing: for specs that assert nothing about logging. */
export function silentLogger(): AppLogger {
  return { pino: pino({ level: 'silent' }) };
}
