import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { prepareDecisionTracesByDay } from './migrations/0005_decision_traces_by_day.prepare';
import { prepareUsageRollups } from './migrations/0012_usage_rollups.prepare';
import type { SqlExecutor, SqlStore } from './sql-store';

/**
 * A folder of forward-only migrations `NNNN_name.sql` and the table that records which ran. The
 * table is one of a closed set of constants: it is an identifier spliced into the bookkeeping SQL
 * below, never a value from outside.
 */
export interface MigrationSet {
  dir: string;
  table: 'schema_migrations' | 'vector_schema_migrations';
  /**
   * Named steps in code, keyed by the file they prepare (`NNNN_name`): work that cannot run in the
   * file's transaction or must not hold its locks for long (CREATE INDEX CONCURRENTLY, a scan that
   * should not block writes). A step runs before its file whenever the file is pending, outside any
   * transaction; it must be idempotent, check under `ctx.lock` that its work is still wanted (another
   * replica may have applied the file meanwhile), and leave the file correct whether or not it ran.
   */
  steps?: Readonly<Record<string, MigrationStep>>;
}

export interface MigrationStepContext {
  store: SqlStore;
  /** Takes the migrator's lock in `tx` (held until it ends): the files and the other replicas' steps wait meanwhile. */
  lock(tx: SqlExecutor): Promise<void>;
}

export type MigrationStep = (ctx: MigrationStepContext) => Promise<void>;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export interface AppliedMigration {
  version: number;
  name: string;
}

/** The analytics store's migrations. `nest build` copies `stores/**\/*.sql` next to the compiled file. */
export const ANALYTICS_MIGRATIONS: MigrationSet = {
  dir: join(__dirname, 'migrations'),
  table: 'schema_migrations',
  steps: { '0005_decision_traces_by_day': prepareDecisionTracesByDay, '0012_usage_rollups': prepareUsageRollups },
};

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** The set's migrations in version order; refuses stray files and duplicate versions. */
export function readMigrations(dir: string): Migration[] {
  const migrations = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .map((file) => {
      const m = FILE_NAME.exec(file);
      if (!m) throw new Error(`migration file ${join(dir, file)} is not named NNNN_name.sql`);
      return { version: Number(m[1]), name: m[2], sql: readFileSync(join(dir, file), 'utf8') };
    })
    .sort((a, b) => a.version - b.version);
  for (let i = 1; i < migrations.length; i++) {
    if (migrations[i].version === migrations[i - 1].version) {
      throw new Error(`two migrations in ${dir} share version ${migrations[i].version}`);
    }
  }
  return migrations;
}

function bookkeeping(table: MigrationSet['table']) {
  return {
    create: `CREATE TABLE IF NOT EXISTS ${table} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    applied: `SELECT version FROM ${table} ORDER BY version`,
    isApplied: `SELECT 1 FROM ${table} WHERE version = $1`,
    record: `INSERT INTO ${table} (version, name) VALUES ($1, $2)`,
  };
}

/*
 * Replicas starting together must not apply a file twice. Every step takes a transaction-scoped
 * advisory lock keyed by the bookkeeping table (so the analytics and vector sets never wait on each
 * other) and re-checks under it; the lock is released by COMMIT/ROLLBACK, so a crashed replica
 * leaves nothing held. PGlite is one connection, where the lock is trivially granted.
 */
const LOCK = 'SELECT pg_advisory_xact_lock(hashtext($1))';

/*
 * A file may bound its waits for locks (`SET LOCAL lock_timeout`) so that a long reader of a table
 * it alters does not make every other statement queue behind it; it then fails with SQLSTATE 55P03
 * and is tried again after a pause, a few times, before the start fails.
 */
const LOCK_RETRIES = 10;
const LOCK_RETRY_PAUSE_MS = 2_000;
const isLockTimeout = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === '55P03';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Applies the set's pending migrations in order, each in its own transaction together with its
 * bookkeeping row, and returns those this call applied (empty when the schema was current).
 */
export async function runMigrations(store: SqlStore, set: MigrationSet): Promise<AppliedMigration[]> {
  const sql = bookkeeping(set.table);
  const migrations = readMigrations(set.dir);
  const done = await store.transaction(async (tx) => {
    await tx.query(LOCK, [set.table]);
    await tx.query(sql.create, []);
    const { rows } = await tx.query<{ version: number }>(sql.applied, []);
    return new Set(rows.map((r) => Number(r.version)));
  });
  const applied: AppliedMigration[] = [];
  const ctx: MigrationStepContext = { store, lock: async (tx) => void (await tx.query(LOCK, [set.table])) };
  for (const m of migrations) {
    if (done.has(m.version)) continue;
    const step = set.steps?.[`${String(m.version).padStart(4, '0')}_${m.name}`];
    if (step) {
      try {
        await step(ctx);
      } catch (err) {
        throw new MigrationError(m, err);
      }
    }
    const ran = await applyFile(store, set, m);
    if (ran) applied.push({ version: m.version, name: m.name });
  }
  return applied;
}

/** Runs one file in a transaction with its bookkeeping row; false when another replica had applied it. */
async function applyFile(store: SqlStore, set: MigrationSet, m: Migration): Promise<boolean> {
  const sql = bookkeeping(set.table);
  for (let attempt = 1; ; attempt++) {
    try {
      return await store.transaction(async (tx) => {
        await tx.query(LOCK, [set.table]);
        if ((await tx.query(sql.isApplied, [m.version])).rows.length > 0) return false;
        try {
          await tx.query(m.sql, []);
        } catch (err) {
          throw new MigrationError(m, err);
        }
        await tx.query(sql.record, [m.version, m.name]);
        return true;
      });
    } catch (err) {
      if (!(err instanceof MigrationError && isLockTimeout(err.cause)) || attempt >= LOCK_RETRIES) throw err;
      await sleep(LOCK_RETRY_PAUSE_MS);
    }
  }
}

/** A migration file failed; `cause` is the database error (its `code` tells e.g. a missing extension). */
export class MigrationError extends Error {
  constructor(
    readonly migration: Migration,
    override readonly cause: unknown,
  ) {
    super(`migration ${String(migration.version).padStart(4, '0')}_${migration.name} failed: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'MigrationError';
  }
}
