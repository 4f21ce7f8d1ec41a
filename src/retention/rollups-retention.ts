import type { SqlExecutor } from '../stores/sql/sql-store';

/*
 * `retention.rollups_days`: the hook through which retention prunes the rollup tables (migration
 * 0006, src/learning/rollups/). The rollups feature owns what may go; until it says otherwise, the
 * hourly buckets whose hours (the sample's and its feedback's) are both older than the cutoff are
 * deleted, a batch at a time: the cutoff is never inside the learning window (the loader refuses
 * rollups_days below it), and buckets past the window are no longer added to or subtracted from
 * the window's totals. A table not there yet is skipped.
 */
const TABLES: ReadonlyArray<{ table: string; older: string }> = [
  { table: 'rollup_model_hours', older: 'bucket < $1' },
  { table: 'rollup_sample_hours', older: 'bucket < $1 AND feedback_bucket < $1' },
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
