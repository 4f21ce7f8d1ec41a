/** Something that runs parameterised SQL: the store itself, or a transaction of it. */
export interface SqlExecutor {
  query<R extends object = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<SqlResult<R>>;
}

export interface SqlResult<R> {
  rows: R[];
  rowCount: number;
}

export interface QueryOptions {
  /**
   * A request is waiting on this read: give up after this long (StoreTimeoutError), however long the
   * server would take. The server adapter's guard applies it; the embedded store, in process, has
   * no outage to wait out and ignores it.
   */
  deadlineMs?: number;
}

/**
 * Port of the analytics store (docs/architecture.md "Three stores behind ports"): Postgres via `pg`, or embedded PGlite. The same SQL and
 * the same numbered migrations run on both. Only repositories use it.
 */
export abstract class SqlStore implements SqlExecutor {
  abstract readonly kind: 'postgres' | 'pglite';
  abstract query<R extends object = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<SqlResult<R>>;
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  abstract transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** Resolves when the store answers `SELECT 1` within `timeoutMs`, else rejects with the reason. */
  abstract ping(timeoutMs: number): Promise<void>;
  abstract close(): Promise<void>;
}
