import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';

export interface FeedbackRecord {
  orgId: string;
  sessionId: string;
  score: number;
  useful: boolean;
}

/*
 * One row per (org, session_id); a later submission replaces the answer and moves
 * `updated_at`, `created_at` keeps the first. No check that the session's traces exist: they are
 * written asynchronously and may land after the feedback.
 */
const UPSERT = `
  INSERT INTO feedback (org_id, session_id, score, useful)
  VALUES ($1, $2, $3, $4)
  ON CONFLICT (org_id, session_id)
  DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`;

/*
 * Answers held while the store could not take them, written when it answers again: each with the
 * time it was given, and only over an answer given before it (another replica, or this one after the
 * outage, may have stored a later answer for the session meanwhile). One row per session per call:
 * the buffer keeps only a session's latest answer.
 */
const UPSERT_HELD = `
  INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at)
  SELECT o, s, sc, u, t, t FROM unnest($1::text[], $2::text[], $3::int[], $4::bool[], $5::timestamptz[]) AS h(o, s, sc, u, t)
  ON CONFLICT (org_id, session_id)
  DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = EXCLUDED.updated_at
  WHERE feedback.updated_at <= EXCLUDED.updated_at`;

export interface HeldFeedback extends FeedbackRecord {
  givenAt: Date;
}

/** Session feedback in the analytics store (table `feedback`). */
@Injectable()
export class FeedbackRepository {
  constructor(private readonly sql: SqlStore) {}

  async upsert(f: FeedbackRecord): Promise<void> {
    await this.sql.query(UPSERT, [f.orgId, f.sessionId, f.score, f.useful]);
  }

  /** Writes held answers in one statement; at most one per (org, session). */
  async upsertHeld(held: readonly HeldFeedback[]): Promise<void> {
    if (held.length === 0) return;
    await this.sql.query(UPSERT_HELD, [
      held.map((h) => h.orgId),
      held.map((h) => h.sessionId),
      held.map((h) => h.score),
      held.map((h) => h.useful),
      held.map((h) => h.givenAt.toISOString()),
    ]);
  }
}
