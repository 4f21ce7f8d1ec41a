import { GatewayError } from '../../common/errors/gateway-error';
import type { StoreFallback } from '../../resilience/store-fallback';

/**
 * Runs Admin API work on the analytics store: a store failure is counted and logged (StoreFallback)
 * and answered 503 `internal`, having changed nothing (docs/architecture.md "Degrade, never hang").
 * The gateway's own errors pass through.
 */
export async function fromAnalytics<T>(fallback: StoreFallback, topic: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    fallback.failed('analytics', `analytics-store:admin-${topic}`, err);
    throw new GatewayError('internal', 'The analytics store is unavailable.', { status: 503, cause: err });
  }
}

/** ISO 8601 in UTC, or null. */
export const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

/** A list page (docs/api.md "Admin API", pagination). */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}
