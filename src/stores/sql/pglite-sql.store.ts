import { AsyncLocalStorage } from 'node:async_hooks';
import { mkdirSync } from 'node:fs';
import { PGlite, type Results, type Transaction } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { withTimeout } from '../with-timeout';
import { SqlStore, type SqlExecutor, type SqlResult } from './sql-store';

export interface PgliteSqlStoreOptions {
  /** Folder of the database files; omitted = in memory (tests). */
  dataDir?: string;
  /** Start from a dump of another instance (`dumpDataDir()`), e.g. a migrated test template. */
  loadDataDir?: Blob;
}

/* Same row shapes as PgSqlStore: a calendar `date` stays its 'YYYY-MM-DD' text (PGlite would give UTC midnight). */
const PARSERS = { 1082: (s: string) => s };

function toResult<R>(res: Results<unknown>): SqlResult<R> {
  // PGlite reports affected rows for writes and 0 for reads; `pg` reports the row count for both.
  return { rows: res.rows as R[], rowCount: res.affectedRows || res.rows.length };
}

type Runner = Pick<PGlite, 'query' | 'exec'> | Transaction;

/** Parameterless SQL runs as a script (several statements allowed), as `pg` does; see PgSqlStore. */
async function run<R>(db: Runner, sql: string, params: readonly unknown[]): Promise<SqlResult<R>> {
  if (params.length === 0) {
    const results = await db.exec(sql);
    return results.length ? toResult<R>(results[results.length - 1]) : { rows: [], rowCount: 0 };
  }
  return toResult<R>(await db.query(sql, params as unknown[]));
}

/**
 * Analytics store embedded in the process (DESIGN §2, no DATABASE_URL): PGlite, file-backed under
 * the data dir. The `vector` extension is loaded so the same instance also serves the vector store;
 * a second PGlite would cost seconds of start-up and its own memory.
 *
 * PGlite is one connection. It serialises on its own: `query()` waits for a running transaction to
 * finish, so a transaction never sees another caller's statements and never has them rolled back
 * with it (the contract suite checks this). The flip side: calling the store itself, rather than
 * `tx`, from inside `transaction()` would wait for its own transaction forever, so that is refused.
 */
export class PgliteSqlStore extends SqlStore {
  readonly kind = 'pglite' as const;
  /**
   * Which transaction (if any) the running code is inside. Enabled only while a transaction is open:
   * an enabled AsyncLocalStorage turns on Node's promise hooks for every promise of the process
   * (issue 5's profile: a few % of a chat request's CPU), and transactions here are rare (migrations,
   * seeding, experiment changes, regressions).
   */
  private readonly inTransaction = new AsyncLocalStorage<{ open: boolean }>();
  private openTransactions = 0;

  private constructor(readonly db: PGlite) {
    super();
  }

  static async create(options: PgliteSqlStoreOptions = {}): Promise<PgliteSqlStore> {
    if (options.dataDir) mkdirSync(options.dataDir, { recursive: true });
    const db = await PGlite.create({
      dataDir: options.dataDir,
      loadDataDir: options.loadDataDir,
      extensions: { vector },
      parsers: PARSERS,
    });
    return new PgliteSqlStore(db);
  }

  async query<R extends object = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    this.refuseInsideOwnTransaction();
    return run<R>(this.db, sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.refuseInsideOwnTransaction();
    const scope = { open: true };
    this.openTransactions++;
    try {
      return await this.db.transaction((t) =>
        this.inTransaction.run(scope, () =>
          fn({
            query: async <R extends object>(sql: string, params: readonly unknown[] = []) => {
              if (!scope.open) throw new Error('transaction is already finished; use the store, not its transaction, after transaction() returns');
              return run<R>(t, sql, params);
            },
          }),
        ),
      );
    } finally {
      scope.open = false;
      // Work that outlives the transaction sees no store (or a closed scope) and may use the store.
      if (--this.openTransactions === 0) this.inTransaction.disable();
    }
  }

  async ping(timeoutMs: number): Promise<void> {
    // Bounded although in-process: a long transaction holds the only connection.
    await withTimeout(this.db.query('SELECT 1'), timeoutMs, 'PGlite');
  }

  async close(): Promise<void> {
    if (!this.db.closed) await this.db.close();
  }

  private refuseInsideOwnTransaction(): void {
    if (this.inTransaction.getStore()?.open) {
      throw new Error('PGlite store called from inside its own transaction(): use the `tx` executor, the store would wait for the transaction forever');
    }
  }
}
