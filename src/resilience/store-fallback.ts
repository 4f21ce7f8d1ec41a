import { Injectable, Optional } from '@nestjs/common';
import { AppLogger } from '../common/logging/logger';
import { ThrottledWarning } from '../common/logging/throttled-warning';
import { MetricsService } from '../metrics/metrics.service';

/** The `store` label of `gateway_store_errors_total`. */
export type StoreName = 'cache' | 'analytics';

export class StoreFallbackOptions {
  /** A topic is logged at most once per this interval (default 30 s). */
  logIntervalMs?: number;
}

const DEFAULT_LOG_INTERVAL_MS = 30_000;

/**
 * What every feature does when a store call fails and it falls back (docs/architecture.md "Degrade,
 * never hang"; docs/operations.md "Store outages"): the failure is counted in
 * `gateway_store_errors_total{store}` every time and logged at most once per interval per topic;
 * then the caller runs its own fallback. The one place that writes that pair, so a degradation is
 * counted and logged the same way everywhere.
 */
@Injectable()
export class StoreFallback {
  private readonly warning: ThrottledWarning;

  constructor(
    private readonly metrics: MetricsService,
    private readonly logger: AppLogger,
    @Optional() options?: StoreFallbackOptions,
  ) {
    this.warning = new ThrottledWarning(logger.pino, options?.logIntervalMs ?? DEFAULT_LOG_INTERVAL_MS);
  }

  /** A call to `store` failed: counted, logged (throttled per topic) with `context`; the caller falls back. */
  failed(store: StoreName, topic: string, err: unknown, context?: Record<string, unknown>): void {
    this.metrics.storeErrors.inc({ store });
    this.warning.warn(topic, err, context);
  }

  /** A degradation that is not a store failure (a refused trace, a shadow copy): logged with the same throttle, not counted as a store error. */
  warn(topic: string, err: unknown, context?: Record<string, unknown>): void {
    this.warning.warn(topic, err, context);
  }

  /** The same counter and logger with a throttle of its own (a feature whose log interval is configurable). */
  withLogInterval(logIntervalMs: number): StoreFallback {
    return new StoreFallback(this.metrics, this.logger, { logIntervalMs });
  }
}
