import type { MigrationStepContext } from './migrator';
import type { SqlExecutor } from './sql-store';

/*
 * Index builds that a migration step runs with CREATE INDEX CONCURRENTLY, from several replicas at
 * once. Such a build cannot run in a transaction, hence cannot hold the migrator's lock: every
 * decision is taken under the lock (is the index there and valid, being built, or to be built
 * here?), the build itself outside it.
 *
 * "Being built" is read from the table's lock, not from pg_stat_progress_create_index: a concurrent
 * build holds SHARE UPDATE EXCLUSIVE on its table from its first statement to its last, while the
 * progress view is read from a copy a transaction takes once and keeps, so a second look in the same
 * transaction can miss a build begun meanwhile. An invalid index whose table nobody holds that lock
 * on is what a build that died left behind: it is dropped under the lock taken NOWAIT (so no build
 * can begin on the table meanwhile) and built again. Were the drop to wait for a build instead, the
 * build would wait for the waiting transaction's snapshot: a deadlock.
 */

/** One index to build: its name, its table and the whole `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS …` statement. */
export interface ConcurrentIndex {
  index: string;
  table: string;
  create: string;
}

/** How long a replica waits for another's build before giving up (the migration then fails and the next start resumes). */
const BUILD_WAIT_MS = 30 * 60_000;
const POLL_MS = 500;
/** Builds that fail in a row (another replica began the same one a moment earlier, a partition was dropped) are looked at again this many times. */
const MAX_FAILURES = 5;
/** Lock not available (NOWAIT, lock_timeout) and deadlock: the decision is taken again after a pause. */
const RETRYABLE = new Set(['55P03', '40P01']);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const codeOf = (err: unknown): unknown => (err as { code?: unknown } | null)?.code;

/**
 * Builds the indexes `pending` lists, one after another, until all are there and valid. `pending`
 * runs under the migrator's lock and returns null when the work is no longer wanted (the file ran).
 */
export async function buildIndexesConcurrently(ctx: MigrationStepContext, pending: (tx: SqlExecutor) => Promise<ConcurrentIndex[] | null>): Promise<void> {
  const deadline = Date.now() + BUILD_WAIT_MS;
  let failures = 0;
  for (;;) {
    let next: ConcurrentIndex | undefined;
    try {
      next = await ctx.store.transaction(async (tx) => {
        await ctx.lock(tx);
        return firstToBuild(tx, (await pending(tx)) ?? []);
      });
    } catch (err) {
      // Another process's build holds the table: look again after a pause.
      if (!RETRYABLE.has(codeOf(err) as string)) throw err;
      if (Date.now() > deadline) throw new Error(`gave up waiting for another process's index build: ${(err as Error).message}`);
      await sleep(POLL_MS);
      continue;
    }
    if (!next) return;
    try {
      await ctx.store.query(next.create, []);
      failures = 0;
    } catch (err) {
      if (++failures > MAX_FAILURES) throw err;
    }
  }
}

/**
 * Under the migrator's lock: the first index that is missing, or an invalid leftover (dropped here),
 * undefined when all are there and valid; one look at the catalog for the whole list. An invalid
 * index whose table a build holds makes the transaction fail at once with 55P03, which the caller
 * takes as "wait".
 */
async function firstToBuild(tx: SqlExecutor, list: readonly ConcurrentIndex[]): Promise<ConcurrentIndex | undefined> {
  if (list.length === 0) return undefined;
  const { rows } = await tx.query<{ valid: boolean | null }>(
    `SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(t.name)) AS valid
       FROM unnest($1::text[]) WITH ORDINALITY AS t(name, n) ORDER BY t.n`,
    [list.map((ix) => ix.index)],
  );
  const i = rows.findIndex((r) => r.valid !== true);
  if (i < 0) return undefined;
  const ix = list[i];
  if (rows[i].valid === false) {
    await tx.query(`LOCK TABLE ${ix.table} IN SHARE UPDATE EXCLUSIVE MODE NOWAIT`, []);
    await tx.query(`SET LOCAL lock_timeout = '5s'`, []);
    await tx.query(`DROP INDEX ${ix.index}`, []);
  }
  return ix;
}
