import { Pool, types as pgTypes, type CustomTypesConfig, type PoolClient, type QueryResult } from 'pg';
import { withTimeout } from '../with-timeout';
import { TRANSACTION_FINISHED } from './transaction-scope';
import { SqlStore, type SqlExecutor, type SqlResult } from './sql-store';

export interface PgSqlStoreOptions {
  /** Pool size per replica. */
  max?: number;
  /** How long to wait for a TCP connection and authentication before rejecting. */
  connectionTimeoutMs?: number;
  /** Server-side cap on one statement (`statement_timeout`). */
  statementTimeoutMs?: number;
  /**
   * Client-side cap on one query (`query_timeout`): covers a server that accepted the connection
   * but stopped answering, where `statement_timeout` never fires. Defaults to the statement
   * timeout plus one second, so the server's clearer error usually wins.
   */
  queryTimeoutMs?: number;
  /** Idle pooled connections are closed after this long. */
  idleTimeoutMs?: number;
  /** A transaction left open by a stuck caller is ended by the server after this long. */
  idleInTransactionTimeoutMs?: number;
}

const DEFAULTS: Required<Omit<PgSqlStoreOptions, 'queryTimeoutMs'>> = {
  max: 10,
  connectionTimeoutMs: 3_000,
  statementTimeoutMs: 5_000,
  idleTimeoutMs: 30_000,
  idleInTransactionTimeoutMs: 60_000,
};

/*
 * Rows must come out of `pg` exactly as they come out of PGlite, so a repository behaves the same on
 * both adapters (the contract suite checks it): int8 as a number while it is a safe integer (PGlite's
 * rule; counts never leave that range), and `date` as its 'YYYY-MM-DD' text, since a calendar day is
 * not an instant and `pg`'s default turns it into local midnight.
 */
const int8 = (s: string): number | bigint => {
  const n = BigInt(s);
  return n < BigInt(Number.MIN_SAFE_INTEGER) || n > BigInt(Number.MAX_SAFE_INTEGER) ? n : Number(n);
};
type Parser = (s: string) => unknown;
const builtinParser = pgTypes.getTypeParser as unknown as (oid: number, format: 'text' | 'binary') => Parser;
const textArray = builtinParser(1009 /* text[] */, 'text') as (s: string) => (string | null)[];
const TYPE_OVERRIDES: Record<number, Parser> = {
  20: int8,
  1016: (s) => textArray(s).map((v) => (v === null ? null : int8(v))),
  1082: (s) => s,
  1182: (s) => textArray(s),
};
const types = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') =>
    (format !== 'binary' && TYPE_OVERRIDES[oid]) || builtinParser(oid, format ?? 'text'),
} as unknown as CustomTypesConfig;

function toResult<R>(res: QueryResult | QueryResult[]): SqlResult<R> {
  // A parameterless multi-statement script (a migration) answers one result per statement.
  const last = Array.isArray(res) ? res[res.length - 1] : res;
  return { rows: (last?.rows ?? []) as R[], rowCount: last?.rowCount ?? 0 };
}

/**
 * Analytics store on a Postgres server through a `pg` pool. Every call is bounded:
 * connecting by `connectionTimeoutMs`, each statement by `statement_timeout` and `query_timeout`,
 * so a dead or stalled server makes calls reject, never hang (docs/architecture.md "Degrade, never hang").
 *
 * `query()` without parameters runs as a script (simple protocol: several statements allowed, the
 * last one's result returned); PgliteSqlStore does the same, so migrations run identically.
 */
export class PgSqlStore extends SqlStore {
  readonly kind = 'postgres' as const;
  private readonly pool: Pool;

  constructor(connectionString: string, options: PgSqlStoreOptions = {}) {
    super();
    const o = { ...DEFAULTS, ...options };
    this.pool = new Pool({
      connectionString,
      max: o.max,
      connectionTimeoutMillis: o.connectionTimeoutMs,
      idleTimeoutMillis: o.idleTimeoutMs,
      statement_timeout: o.statementTimeoutMs,
      query_timeout: options.queryTimeoutMs ?? o.statementTimeoutMs + 1_000,
      idle_in_transaction_session_timeout: o.idleInTransactionTimeoutMs,
      // Month boundaries and `now()::date` must not depend on the server's configured zone (monthly limits count UTC months).
      // No JIT: the gateway's statements read a few index ranges each, and Postgres's default would
      // compile any whose estimated cost passes jit_above_cost. The usage read over a month of day
      // partitions, with its many small parts, spent 430 ms compiling for 40 ms of work (docs/operations.md
      // "Real servers"), a trace search by request id 190 ms for 17.
      options: '-c TimeZone=UTC -c jit=off',
      application_name: 'routing-gateway',
      keepAlive: true,
      types,
    });
    // A server restart or a killed backend makes idle pooled clients emit `error`. The pool has
    // already dropped that client and opens a fresh one on the next call; without a listener the
    // event would be thrown and take the whole process down.
    this.pool.on('error', () => undefined);
  }

  async query<R extends object = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    return toResult<R>(await this.pool.query(sql, params as unknown[]));
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // While checked out the pool does not listen on the client; a server dying between two
    // statements of `fn` would otherwise emit an unhandled `error` and end the process.
    let broken: Error | undefined;
    const onError = (err: Error) => (broken ??= err);
    client.on('error', onError);
    const tx = new PgTransaction(client);
    try {
      await client.query('BEGIN');
      const result = await fn(tx);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      // Also right after a failed BEGIN or COMMIT (then a no-op). If even ROLLBACK fails, the
      // connection is in an unknown state and must not go back to the pool.
      await client.query('ROLLBACK').catch((rollbackErr: Error) => (broken ??= rollbackErr));
      throw err;
    } finally {
      tx.closed = true;
      // A broken client keeps the listener: it may still emit while the pool tears it down.
      if (!broken) client.off('error', onError);
      // Passing an error destroys the connection instead of returning it to the pool.
      client.release(broken);
    }
  }

  async ping(timeoutMs: number): Promise<void> {
    await withTimeout(this.pool.query('SELECT 1'), timeoutMs, 'Postgres');
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

class PgTransaction implements SqlExecutor {
  closed = false;
  constructor(private readonly client: PoolClient) {}

  async query<R extends object = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    // A statement on a finished transaction would run outside it, on a connection someone else may now hold.
    if (this.closed) throw new Error(TRANSACTION_FINISHED);
    return toResult<R>(await this.client.query(sql, params as unknown[]));
  }
}
