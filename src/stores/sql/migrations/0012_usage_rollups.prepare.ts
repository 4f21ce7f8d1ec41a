import type { SqlExecutor } from '../sql-store';
import type { MigrationStepContext } from '../migrator';

/*
 * The migrator's step before 0012_usage_rollups.sql (read that file first). The file creates two
 * indexes on the partitioned `decision_traces`; on an installation with months of traces, building
 * them there would hold every partition's inserts for as long as the builds scan the traces. So this
 * step first builds each partition's own index with CREATE INDEX CONCURRENTLY (reads and inserts go
 * on), and the file's CREATE INDEX on the parent then finds an equal index on every partition and
 * attaches it instead of building one: a catalog change.
 *
 * Several replicas may start at once, as for 0005's step: each decision is taken under the
 * migrator's lock (nothing to do once the file ran); a build cannot hold that lock, so a replica that
 * finds a build under way elsewhere waits for it, one that finds the invalid index a dead build left
 * drops it and builds again, and two that start the same build at once see one fail and look again.
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

/** How long a replica waits for another's build before giving up (the migration then fails and the next start resumes). */
const BUILD_WAIT_MS = 30 * 60_000;
const POLL_MS = 500;
/** Partition names are the retention job's (decision_traces_pYYYYMMDD, _default, _before_YYYYMMDD): checked before they are spliced into DDL. */
const PARTITION = /^decision_traces_[a-z0-9_]{1,40}$/;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

type BuildState = 'done' | 'build' | 'wait';

/** Under the migrator's lock: the file has run (nothing to do), or the partitions still to build and how. */
async function plan(ctx: MigrationStepContext): Promise<'ran' | Array<{ partition: string; index: string; definition: string; state: BuildState }>> {
  return ctx.store.transaction(async (tx) => {
    await ctx.lock(tx);
    if (await fileRan(tx)) return 'ran';
    const { rows } = await tx.query<{ partition: string }>(
      `SELECT c.relname AS partition FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = to_regclass('decision_traces') ORDER BY c.relname`,
      [],
    );
    const out = [];
    for (const { partition } of rows) {
      if (!PARTITION.test(partition)) throw new Error(`unexpected partition name ${partition}`);
      for (const ix of INDEXES) {
        const index = `${partition}_${ix.suffix}`;
        out.push({ partition, index, definition: ix.definition, state: await stateOf(tx, index) });
      }
    }
    return out;
  });
}

/** The file creates the parent's indexes: once they are there, it has run. */
async function fileRan(tx: SqlExecutor): Promise<boolean> {
  const { rows } = await tx.query<{ ran: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS ran`, [INDEXES[0].parent]);
  return rows[0].ran;
}

async function stateOf(tx: SqlExecutor, index: string): Promise<BuildState> {
  const { rows } = await tx.query<{ valid: boolean | null; building: boolean }>(
    `SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)) AS valid,
            EXISTS (SELECT 1 FROM pg_stat_progress_create_index WHERE index_relid = to_regclass($1) AND pid <> pg_backend_pid()) AS building`,
    [index],
  );
  const { valid, building } = rows[0];
  if (valid === true) return 'done';
  if (valid === null) return 'build';
  if (building) return 'wait';
  // Invalid and nobody building it: what a build that died left behind.
  await tx.query(`SET LOCAL lock_timeout = '5s'`, []);
  await tx.query(`DROP INDEX ${index}`, []);
  return 'build';
}

/** Builds every partition's indexes for 0012_usage_rollups.sql; idempotent, safe from several replicas at once. */
export async function prepareUsageRollups(ctx: MigrationStepContext): Promise<void> {
  // The embedded store is one connection: nothing writes beside the migration, so the file builds.
  if (ctx.store.kind === 'pglite') return;
  const deadline = Date.now() + BUILD_WAIT_MS;
  let failures = 0;
  for (;;) {
    const todo = await plan(ctx);
    if (todo === 'ran') return;
    const next = todo.find((t) => t.state !== 'done');
    if (!next) return;
    if (next.state === 'wait') {
      if (Date.now() > deadline) throw new Error(`gave up waiting for another process's build of ${next.index}`);
      await sleep(POLL_MS);
      continue;
    }
    try {
      await ctx.store.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${next.index} ON ${next.partition} ${next.definition}`, []);
    } catch (err) {
      // Another replica began the same build a moment earlier, or ran the file meanwhile, or a
      // partition was dropped by retention: look again.
      if (++failures > 5) throw err;
    }
  }
}
