import { buildIndexesConcurrently, type ConcurrentIndex } from '../concurrent-index';
import type { MigrationStepContext } from '../migrator';
import type { SqlExecutor } from '../sql-store';

/*
 * The migrator's step before 0005_decision_traces_by_day.sql (read that file first). It does the
 * long parts of turning the old `decision_traces` into a partition while reads and inserts go on,
 * so the file's own transaction only renames and attaches:
 *
 *   1. CHECK (created_at < bound) NOT VALID, named `decision_traces_before_YYYYMMDD` after the bound
 *      (00:00 UTC, at least two days ahead and after every stored trace): a short ACCESS EXCLUSIVE
 *      lock, no scan. Inserts go on meeting it: they are stamped now.
 *   2. VALIDATE it, in its own transaction: a scan under SHARE UPDATE EXCLUSIVE, which blocks
 *      neither reads nor inserts.
 *   3. CREATE UNIQUE INDEX CONCURRENTLY (created_at, id): the key of the partitioned table, which
 *      the old table must have to become its partition; built without blocking writes.
 *
 * Several replicas may start at once. Each decision is taken in a transaction holding the
 * migrator's lock, after checking the table is still the old, unpartitioned one (a replica that
 * arrives after the file ran finds nothing to do). The index is built as `concurrent-index.ts` says.
 */

const KEY_INDEX = 'decision_traces_created_id_key';
const BOUND = /^decision_traces_before_(\d{4})(\d{2})(\d{2})$/;
const DAY_MS = 86_400_000;

async function isUnpartitioned(tx: SqlExecutor): Promise<boolean> {
  const { rows } = await tx.query<{ kind: string | null }>(`SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass('decision_traces')) AS kind`, []);
  return rows[0]?.kind === 'r';
}

/** The bound constraint, if one is there: its name, its day (ms, 00:00 UTC) and whether it is validated. */
async function boundConstraint(tx: SqlExecutor): Promise<{ name: string; dayMs: number; validated: boolean } | null> {
  const { rows } = await tx.query<{ conname: string; convalidated: boolean }>(
    `SELECT conname, convalidated FROM pg_constraint
      WHERE conrelid = 'decision_traces'::regclass AND contype = 'c' AND conname ~ '^decision_traces_before_[0-9]{8}$'
      ORDER BY conname DESC LIMIT 1`,
    [],
  );
  const m = rows[0] && BOUND.exec(rows[0].conname);
  return m ? { name: rows[0].conname, dayMs: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])), validated: rows[0].convalidated } : null;
}

/** Steps 1 and 2; false when the table is no longer the old one (the file already ran). */
async function validatedBound(ctx: MigrationStepContext): Promise<boolean> {
  const bound = await ctx.store.transaction(async (tx) => {
    await ctx.lock(tx);
    if (!(await isUnpartitioned(tx))) return null;
    await tx.query(`SET LOCAL lock_timeout = '5s'`, []);
    const found = await boundConstraint(tx);
    // A bound left by a start that died long ago may be less than a day ahead by now: inserts stamped
    // after it would be refused, so it is replaced by a fresh one.
    if (found && found.dayMs > Date.now() + DAY_MS) return found;
    if (found) await tx.query(`ALTER TABLE decision_traces DROP CONSTRAINT ${found.name}`, []);
    const { rows } = await tx.query<{ day: string }>(
      `SELECT to_char(greatest((now() AT TIME ZONE 'UTC')::date + 2, (max(created_at) AT TIME ZONE 'UTC')::date + 1), 'YYYY-MM-DD') AS day FROM decision_traces`,
      [],
    );
    const day = rows[0].day;
    const name = `decision_traces_before_${day.replace(/-/g, '')}`;
    // `day` is the server's own YYYY-MM-DD: digits and dashes, safe to splice (DDL takes no parameters).
    if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new Error(`unexpected bound day ${day}`);
    await tx.query(`ALTER TABLE decision_traces ADD CONSTRAINT ${name} CHECK (created_at < timestamptz '${day} 00:00:00+00') NOT VALID`, []);
    return { name, validated: false };
  });
  if (!bound) return false;
  if (bound.validated) return true;
  return ctx.store.transaction(async (tx) => {
    await ctx.lock(tx);
    if (!(await isUnpartitioned(tx))) return false;
    await tx.query(`SET LOCAL lock_timeout = '5s'`, []);
    await tx.query(`ALTER TABLE decision_traces VALIDATE CONSTRAINT ${bound.name}`, []);
    return true;
  });
}

const KEY: ConcurrentIndex = {
  index: KEY_INDEX,
  table: 'decision_traces',
  create: `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ${KEY_INDEX} ON decision_traces (created_at, id)`,
};

/** Prepares `decision_traces` for 0005_decision_traces_by_day.sql; idempotent, safe from several replicas at once. */
export async function prepareDecisionTracesByDay(ctx: MigrationStepContext): Promise<void> {
  if (!(await validatedBound(ctx))) return;
  // Step 3, unless the table is no longer the old one (the file already ran).
  await buildIndexesConcurrently(ctx, async (tx) => ((await isUnpartitioned(tx)) ? [KEY] : null));
}
