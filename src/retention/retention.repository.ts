import { Injectable } from '@nestjs/common';
import { SqlExecutor, SqlStore } from '../stores/sql/sql-store';

/*
 * Age-based deletes of the tables retention keeps bounded without partitions: feedback (one row per
 * organisation and session, by when it was last given) and experiment lifecycle events (a handful
 * per experiment). At their volume a DELETE by age in batches is cheap and leaves little for vacuum;
 * decision traces, thousands of times more rows, are dropped a day at a time instead
 * (trace-partitions.repository.ts). A batch is one short statement of its own, so a long backlog
 * never holds a lock or a transaction for long.
 */
const DELETE_FEEDBACK = `
  DELETE FROM feedback WHERE (org_id, session_id) IN (
    SELECT org_id, session_id FROM feedback WHERE updated_at < $1 LIMIT $2)`;
const COUNT_FEEDBACK = `SELECT count(*)::int AS n FROM feedback WHERE updated_at < $1`;

const DELETE_EVENTS = `
  DELETE FROM experiment_events WHERE id IN (
    SELECT id FROM experiment_events WHERE created_at < $1 ORDER BY id LIMIT $2)`;
const COUNT_EVENTS = `SELECT count(*)::int AS n FROM experiment_events WHERE created_at < $1`;

export type AgedTable = 'feedback' | 'experiment_events';

@Injectable()
export class RetentionRepository {
  constructor(private readonly sql: SqlStore) {}

  /** Rows of `table` older than `before`. */
  async countBefore(table: AgedTable, before: Date): Promise<number> {
    const { rows } = await this.sql.query<{ n: number }>(table === 'feedback' ? COUNT_FEEDBACK : COUNT_EVENTS, [before.toISOString()]);
    return rows[0].n;
  }

  /** Deletes up to `limit` rows of `table` older than `before`; returns how many. */
  async deleteBefore(tx: SqlExecutor, table: AgedTable, before: Date, limit: number): Promise<number> {
    const { rowCount } = await tx.query(table === 'feedback' ? DELETE_FEEDBACK : DELETE_EVENTS, [before.toISOString(), limit]);
    return rowCount;
  }
}
