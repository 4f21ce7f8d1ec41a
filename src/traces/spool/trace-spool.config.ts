import { resolve } from 'node:path';
import type { AppConfig } from '../../config/app-config';
import { GuardedSqlStore } from '../../resilience/guarded-stores';
import type { SqlStore } from '../../stores/sql/sql-store';
import { SPOOL_DIR_NAME } from './trace-spool';

/**
 * Where and how the decision-trace writer spools (docs/operations.md "Store outages"). Absent, or
 * `maxBytes` 0, the writer holds traces in memory only.
 */
export class TraceSpoolConfig {
  /** The spool folder: `<GATEWAY_DATA_DIR>/trace-spool`. */
  dir!: string;
  /** Config `traces.spool_max_bytes`. */
  maxBytes!: number;
  /** Traces replayed per second at most, so a long backlog does not crowd the store or this process. */
  replayPerSecond?: number;
  segmentBytes?: number;
  fsyncIntervalMs?: number;
  /** How often opening the spool is tried again after it failed (another process held it). */
  openRetryMs?: number;
  /**
   * The analytics store's breaker (docs/operations.md "The store breaker"), when it has one: while it
   * says the store is out, batches go straight to the spool, and replay waits until it lets calls through.
   */
  store?: { readonly available: boolean };
}

/** The spool of this deployment: in the data dir, capped by `traces.spool_max_bytes`, following the Postgres breaker. */
export function traceSpoolConfig(config: AppConfig, sql: SqlStore): TraceSpoolConfig {
  return {
    dir: resolve(config.env.dataDir, SPOOL_DIR_NAME),
    maxBytes: config.gateway.traces.spool_max_bytes,
    store: sql instanceof GuardedSqlStore ? sql.guard : undefined,
  };
}
