import type { SqlExecutor } from '../stores/sql/sql-store';

/*
 * `retention.rollups_days`: the hook through which retention prunes the rollup tables (the learning
 * rollups of migration 0006, src/learning/rollups/; the Admin API's usage rollups of 0012,
 * src/admin/usage/). Their features own what may go; until they say otherwise, a bucket goes once the
 * whole of it (and, for a sample, of its feedback's hour) is older than the cutoff, a batch at a time.
 * The cutoff is never inside the learning window (the loader refuses rollups_days below it), and
 * buckets past the window are no longer added to or subtracted from the window's totals. Minute
 * usage rows are kept for a short horizon by the usage job itself. A table not there is skipped.
 */
const TABLES: ReadonlyArray<{ table: string; older: string }> = [
  { table: 'rollup_model_hours', older: `bucket <= $1::timestamptz - interval '1 hour'` },
  { table: 'rollup_sample_hours', older: `bucket <= $1::timestamptz - interval '1 hour' AND feedback_bucket <= $1::timestamptz - interval '1 hour'` },
  {
    table: 'usage_rollups',
    older: `((step = 'hour' AND bucket <= $1::timestamptz - interval '1 hour') OR (step = 'day' AND bucket <= $1::timestamptz - interval '1 day'))`,
  },
];

export interface RollupPrune {
  table: string;
  rows: number;
}

/** Counts (`dryRun`) or deletes, up to `limit` rows per table and call, the rollup rows older than `before`. */
export async function pruneRollups(tx: SqlExecutor, before: Date, limit: number, dryRun: boolean): Promise<RollupPrune[]> {
  const out: RollupPrune[] = [];
  for (const { table, older } of TABLES) {
    const { rows } = await tx.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [table]);
    if (!rows[0].present) continue;
    const sql = dryRun
      ? `SELECT count(*)::int AS n FROM ${table} WHERE ${older}`
      : `WITH gone AS (DELETE FROM ${table} WHERE ctid = ANY (ARRAY (SELECT ctid FROM ${table} WHERE ${older} LIMIT $2)) RETURNING 1) SELECT count(*)::int AS n FROM gone`;
    const r = await tx.query<{ n: number }>(sql, dryRun ? [before.toISOString()] : [before.toISOString(), limit]);
    out.push({ table, rows: r.rows[0].n });
  }
  return out;
}
