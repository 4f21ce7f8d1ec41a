import type { Logger } from 'pino';
import { errorMessage } from '../errors/error-message';

/**
 * Logs a degradation at most once per interval per topic (docs/architecture.md "Degrade, never
 * hang"); the caller counts every occurrence in metrics.
 */
export class ThrottledWarning {
  private readonly last = new Map<string, number>();
  constructor(
    private readonly log: Logger,
    private readonly intervalMs = 30_000,
  ) {}

  warn(topic: string, err: unknown, fields: Record<string, unknown> = {}): void {
    const now = Date.now();
    if (now - (this.last.get(topic) ?? -Infinity) < this.intervalMs) return;
    this.last.set(topic, now);
    this.log.warn({ topic, reason: errorMessage(err), ...fields }, 'degraded');
  }
}
