import { buildIndexesConcurrently, type ConcurrentIndex } from '../concurrent-index';
import type { MigrationStepContext } from '../migrator';
import type { SqlExecutor } from '../sql-store';

/*
 * The migrator's step before 0012_usage_rollups.sql (read that file first). The file creates two
 * indexes on the partitioned `decision_traces`; on an installation with months of traces, building
 * them there would hold every partition's inserts for as long as the builds scan the traces. So this
 * step first builds each partition's own index with CREATE INDEX CONCURRENTLY (reads and inserts go
 * on), and the file's CREATE INDEX on the parent then finds an equal index on every partition and
 * attaches it instead of building one: a catalog change.
 *
 * Several replicas may start at once: the builds are taken in turn as `concurrent-index.ts` says
 * (nothing to do once the file ran).
 */

/** The file's indexes, as each partition's own (name suffix, definition after `ON <partition>`). Kept equal to the file's. */
const INDEXES: ReadonlyArray<{ suffix: string; parent: string; definition: string }> = [
  {
    suffix: 'request_session_idx',
    parent: 'decision_traces_request_session_idx',
    definition: `USING brin (
      request_id text_bloom_ops (n_distinct_per_range = 1000, false_positive_rate = 0.001),
      session_id text_bloom_ops (n_distinct_per_range = 400, false_positive_rate = 0.001)
    ) WITH (pages_per_range = 32, autosummarize = on)`,
  },
  {
    suffix: 'errors_idx',
    parent: 'decision_traces_errors_idx',
    definition: `(org_id, created_at, id) WHERE status >= 400 OR error_code IS NOT NULL`,
  },
];

/** Partition names are the retention job's (decision_traces_pYYYYMMDD, _default, _before_YYYYMMDD): checked before they are spliced into DDL. */
const PARTITION = /^decision_traces_[a-z0-9_]{1,40}$/;

/** Under the migrator's lock: null once the file has run, else every partition's two indexes. */
async function pending(tx: SqlExecutor): Promise<ConcurrentIndex[] | null> {
  // The file creates the parent's indexes: once they are there, it has run.
  const { rows: ran } = await tx.query<{ ran: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS ran`, [INDEXES[0].parent]);
  if (ran[0].ran) return null;
  const { rows } = await tx.query<{ partition: string }>(
    `SELECT c.relname AS partition FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = to_regclass('decision_traces') ORDER BY c.relname`,
    [],
  );
  return rows.flatMap(({ partition }) => {
    if (!PARTITION.test(partition)) throw new Error(`unexpected partition name ${partition}`);
    return INDEXES.map((ix) => {
      const index = `${partition}_${ix.suffix}`;
      return { index, table: partition, create: `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index} ON ${partition} ${ix.definition}` };
    });
  });
}

/** Builds every partition's indexes for 0012_usage_rollups.sql; idempotent, safe from several replicas at once. */
export async function prepareUsageRollups(ctx: MigrationStepContext): Promise<void> {
  // The embedded store is one connection: nothing writes beside the migration, so the file builds.
  if (ctx.store.kind === 'pglite') return;
  await buildIndexesConcurrently(ctx, pending);
}
