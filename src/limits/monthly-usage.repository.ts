import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';

/** A number of requests to add to one organisation's month; `month` is the first day, 'YYYY-MM-01' (UTC). */
export interface UsageDelta {
  orgId: string;
  month: string;
  count: number;
}

const COUNT = `SELECT count FROM monthly_usage WHERE org_id = $1 AND month = $2::date`;

/*
 * One statement for a whole batch (constant text, arrays as parameters). Each (org, month) appears
 * once per batch: Postgres refuses to update one row twice in a single INSERT ... ON CONFLICT.
 */
const ADD_COUNTS = `
  INSERT INTO monthly_usage (org_id, month, count)
  SELECT * FROM unnest($1::text[], $2::date[], $3::bigint[])
  ON CONFLICT (org_id, month) DO UPDATE SET count = monthly_usage.count + EXCLUDED.count`;

/*
 * Check-and-count in one statement (the monthly limit falls back to the analytics store when Redis
 * is down: docs/architecture.md "One limiter for every limit"). The row lock of ON CONFLICT DO UPDATE serialises concurrent replicas, and the
 * WHERE is re-checked on the locked row, so the count never passes $3. Needs $3 >= 1: a new row
 * starts at 1.
 */
const INCREMENT_BELOW = `
  INSERT INTO monthly_usage (org_id, month, count) VALUES ($1, $2::date, 1)
  ON CONFLICT (org_id, month) DO UPDATE SET count = monthly_usage.count + 1 WHERE monthly_usage.count < $3
  RETURNING count`;

/** The durable monthly request counts (table `monthly_usage`). */
@Injectable()
export class MonthlyUsageRepository {
  constructor(private readonly sql: SqlStore) {}

  /** The stored count of an organisation's month; 0 when there is no row. */
  /** `deadlineMs` on this and `incrementBelow`: a request waits on it (see QueryOptions). */
  async count(orgId: string, month: string, deadlineMs?: number): Promise<number> {
    const { rows } = await this.sql.query<{ count: number | string }>(COUNT, [orgId, month], { deadlineMs });
    return rows.length ? Number(rows[0].count) : 0;
  }

  /** Adds every delta in one statement. Deltas must name distinct (org, month) pairs. */
  async addCounts(deltas: readonly UsageDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    await this.sql.query(ADD_COUNTS, [deltas.map((d) => d.orgId), deltas.map((d) => d.month), deltas.map((d) => d.count)]);
  }

  /**
   * Counts one request unless the month already holds `limit` (>= 1); `count` is the value after
   * the call, read again when refused.
   */
  async incrementBelow(orgId: string, month: string, limit: number, deadlineMs?: number): Promise<{ allowed: boolean; count: number }> {
    const { rows } = await this.sql.query<{ count: number | string }>(INCREMENT_BELOW, [orgId, month, limit], { deadlineMs });
    if (rows.length) return { allowed: true, count: Number(rows[0].count) };
    return { allowed: false, count: await this.count(orgId, month, deadlineMs) };
  }
}
