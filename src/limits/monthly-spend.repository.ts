import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';

/**
 * Spend to add to one row of `monthly_spend`: an organisation's (keyId '') or one of its keys', for
 * the month whose first day is `month` ('YYYY-MM-01', UTC), in micro-USD (may be negative: an
 * estimate charged up front and settled lower).
 */
export interface SpendDelta {
  orgId: string;
  keyId: string;
  month: string;
  microUsd: number;
}

const TOTAL = `SELECT micro_usd FROM monthly_spend WHERE org_id = $1 AND key_id = $2 AND month = $3::date`;

/* One statement for a whole batch; each (org, key, month) appears once per batch (see monthly_usage). */
const ADD = `
  INSERT INTO monthly_spend (org_id, key_id, month, micro_usd)
  SELECT * FROM unnest($1::text[], $2::text[], $3::date[], $4::bigint[])
  ON CONFLICT (org_id, key_id, month) DO UPDATE SET micro_usd = monthly_spend.micro_usd + EXCLUDED.micro_usd`;

/*
 * Check-and-add in one statement: the budgets fall back to the analytics store while Redis is down
 * (docs/architecture.md "One limiter for every limit"). The row lock of ON CONFLICT DO UPDATE
 * serialises concurrent replicas and the WHERE is re-checked on the locked row, so the row never
 * passes $5. Needs $4 <= $5: a new row starts at $4.
 */
const ADD_BELOW = `
  INSERT INTO monthly_spend (org_id, key_id, month, micro_usd) VALUES ($1, $2, $3::date, $4)
  ON CONFLICT (org_id, key_id, month) DO UPDATE SET micro_usd = monthly_spend.micro_usd + EXCLUDED.micro_usd
    WHERE monthly_spend.micro_usd + EXCLUDED.micro_usd <= $5
  RETURNING micro_usd`;

/** The durable spend per month (table `monthly_spend`), for the budgets (README "Limits"). */
@Injectable()
export class MonthlySpendRepository {
  constructor(private readonly sql: SqlStore) {}

  /** The stored spend of a row; 0 when there is none. `deadlineMs`: a request waits on it (see QueryOptions). */
  async total(orgId: string, keyId: string, month: string, deadlineMs?: number): Promise<number> {
    const { rows } = await this.sql.query<{ micro_usd: number | string }>(TOTAL, [orgId, keyId, month], { deadlineMs });
    return rows.length ? Number(rows[0].micro_usd) : 0;
  }

  /** Adds every delta in one statement. Deltas must name distinct rows. */
  async add(deltas: readonly SpendDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    await this.sql.query(ADD, [deltas.map((d) => d.orgId), deltas.map((d) => d.keyId), deltas.map((d) => d.month), deltas.map((d) => d.microUsd)]);
  }

  /** Adds `amount` unless the row would pass `limit` (amount <= limit); `total` is the row after the call, read again when refused. */
  async addBelow(orgId: string, keyId: string, month: string, amount: number, limit: number, deadlineMs?: number): Promise<{ allowed: boolean; total: number }> {
    const { rows } = await this.sql.query<{ micro_usd: number | string }>(ADD_BELOW, [orgId, keyId, month, amount, limit], { deadlineMs });
    if (rows.length) return { allowed: true, total: Number(rows[0].micro_usd) };
    return { allowed: false, total: await this.total(orgId, keyId, month, deadlineMs) };
  }

  /** The organisation's spend this month and each of its keys', for the Admin API (keyId '' = the organisation). */
  async ofOrg(orgId: string, month: string): Promise<Map<string, number>> {
    const { rows } = await this.sql.query<{ key_id: string; micro_usd: number | string }>(
      `SELECT key_id, micro_usd FROM monthly_spend WHERE org_id = $1 AND month = $2::date`,
      [orgId, month],
    );
    return new Map(rows.map((r) => [r.key_id, Number(r.micro_usd)]));
  }
}
