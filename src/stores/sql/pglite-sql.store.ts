import { PGlite, type Results, type Transaction } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { withTimeout } from '../with-timeout';
import { PgliteDirLock } from './pglite-dir-lock';
import { SqlStore, type SqlExecutor, type SqlResult } from './sql-store';
import { TRANSACTION_FINISHED, TransactionScope } from './transaction-scope';

export interface PgliteSqlStoreOptions {
  /** Folder of the database files, locked for this process until close (PgliteDirLock); omitted = in memory (tests), no lock. */
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
 * Analytics store embedded in the process (no DATABASE_URL): PGlite, file-backed under
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
  private readonly scope = new TransactionScope();

  private constructor(
    readonly db: PGlite,
    private readonly lock: PgliteDirLock | undefined,
  ) {
    super();
  }

  /** Rejects with PgliteDirLockedError when another process has `dataDir` open. */
  static async create(options: PgliteSqlStoreOptions = {}): Promise<PgliteSqlStore> {
    return PgliteDirLock.openWith(options.dataDir, async (lock) => {
      const db = await PGlite.create({
        dataDir: options.dataDir,
        loadDataDir: options.loadDataDir,
        extensions: { vector },
        parsers: PARSERS,
      });
      return new PgliteSqlStore(db, lock);
    });
  }

  async query<R extends object = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    this.scope.refuseInside();
    return run<R>(this.db, sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.scope.refuseInside();
    return this.db.transaction((t) =>
      this.scope.run((scope) =>
        fn({
          query: async <R extends object>(sql: string, params: readonly unknown[] = []) => {
            if (!scope.open) throw new Error(TRANSACTION_FINISHED);
            return run<R>(t, sql, params);
          },
        }),
      ),
    );
  }

  async ping(timeoutMs: number): Promise<void> {
    // Bounded although in-process: a long transaction holds the only connection.
    await withTimeout(this.db.query('SELECT 1'), timeoutMs, 'PGlite');
  }

  async close(): Promise<void> {
    try {
      if (!this.db.closed) await this.db.close();
    } finally {
      this.lock?.release();
    }
  }
}
