import { Injectable } from '@nestjs/common';
import type { ExperimentEventKind, ExperimentRecord, ExperimentStatus } from '../../experiments/experiment.record';
import { EXPERIMENT_COLUMNS, toExperimentRecord, type ExperimentRow } from '../../experiments/experiments.repository';
import { SqlStore } from '../../stores/sql/sql-store';

/** A lifecycle event as stored: its row id and time beside what was recorded. */
export interface StoredExperimentEvent {
  id: string;
  kind: ExperimentEventKind;
  actorApiKeyId: string | null;
  detail: Record<string, unknown> | null;
  createdAt: Date;
}

/*
 * The Admin API's reads of `experiments` and `experiment_events` (docs/api.md "Admin API",
 * experiments); the writes stay with ExperimentsRepository. Every statement names the organisation.
 * A page is newest first after the cursor's (created_at, id), served by experiments_org_created_idx;
 * `position` is created_at to the microsecond in UTC (a JavaScript Date keeps milliseconds only, so a
 * cursor made from one could skip or repeat rows). A malformed id is passed as NULL, which matches
 * nothing, so missing, malformed and foreign ids take the same query and get the same empty answer.
 */
const PAGE = `
  SELECT ${EXPERIMENT_COLUMNS}, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position
  FROM experiments
  WHERE org_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid)) AND ($4::text IS NULL OR status = $4::text)
  ORDER BY created_at DESC, id DESC
  LIMIT $5`;
const FIND = `SELECT ${EXPERIMENT_COLUMNS} FROM experiments WHERE id = $1::uuid AND org_id = $2`;
/* Oldest first after the event id $3 (experiment_events_experiment_idx). */
const EVENTS = `
  SELECT id::text AS id, kind, actor_api_key_id, detail, created_at FROM experiment_events
  WHERE experiment_id = $1::uuid AND org_id = $2 AND id > $3::bigint
  ORDER BY id
  LIMIT $4`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const uuidOrNull = (id: string): string | null => (UUID.test(id) ? id : null);

@Injectable()
export class AdminExperimentsRepository {
  constructor(private readonly sql: SqlStore) {}

  /** One page of the organisation's experiments, newest first, optionally of one status; each with its position. */
  async page(orgId: string, after: { position: string; id: string } | null, status: ExperimentStatus | null, limit: number): Promise<Array<{ record: ExperimentRecord; position: string }>> {
    const afterId = after ? uuidOrNull(after.id) : null;
    const { rows } = await this.sql.query<ExperimentRow & { position: string }>(PAGE, [orgId, afterId === null ? null : after!.position, afterId, status, limit]);
    return rows.map((r) => ({ record: toExperimentRecord(r), position: r.position }));
  }

  /** The organisation's experiment; null for another organisation's, a missing and a malformed id alike. */
  async find(orgId: string, id: string): Promise<ExperimentRecord | null> {
    const { rows } = await this.sql.query<ExperimentRow>(FIND, [uuidOrNull(id), orgId]);
    return rows.length ? toExperimentRecord(rows[0]) : null;
  }

  /** A page of the experiment's lifecycle events, oldest first, after the event id `afterId` ("0" for the first page). */
  async events(orgId: string, experimentId: string, afterId: string, limit: number): Promise<StoredExperimentEvent[]> {
    const { rows } = await this.sql.query<{ id: string; kind: ExperimentEventKind; actor_api_key_id: string | null; detail: Record<string, unknown> | null; created_at: Date | string }>(
      EVENTS,
      [uuidOrNull(experimentId), orgId, afterId, limit],
    );
    return rows.map((r) => ({
      id: String(r.id),
      kind: r.kind,
      actorApiKeyId: r.actor_api_key_id,
      detail: r.detail ?? null,
      createdAt: r.created_at instanceof Date ? r.created_at : new Date(r.created_at),
    }));
  }
}
