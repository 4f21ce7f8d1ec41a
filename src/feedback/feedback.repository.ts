import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';

export interface FeedbackRecord {
  orgId: string;
  sessionId: string;
  score: number;
  useful: boolean;
}

/*
 * DESIGN §5: one row per (org, session_id); a later submission replaces the answer and moves
 * `updated_at`, `created_at` keeps the first. No check that the session's traces exist: they are
 * written asynchronously and may land after the feedback.
 */
const UPSERT = `
  INSERT INTO feedback (org_id, session_id, score, useful)
  VALUES ($1, $2, $3, $4)
  ON CONFLICT (org_id, session_id)
  DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`;

/** Session feedback in the analytics store (table `feedback`). */
@Injectable()
export class FeedbackRepository {
  constructor(private readonly sql: SqlStore) {}

  async upsert(f: FeedbackRecord): Promise<void> {
    await this.sql.query(UPSERT, [f.orgId, f.sessionId, f.score, f.useful]);
  }
}
