import { Injectable } from '@nestjs/common';
import { SqlExecutor, SqlStore } from '../stores/sql/sql-store';
import type { ExperimentEvent, ExperimentRecord, ExperimentStatus, ExperimentType, NewExperiment } from './experiment.record';

interface ExperimentRow {
  id: string;
  org_id: string;
  type: ExperimentType;
  status: ExperimentStatus;
  traffic_pct: number;
  baseline_provider: string;
  baseline_model: string;
  candidate_provider: string;
  candidate_model: string;
  min_n: number;
  max_regression: number;
  summary: Record<string, unknown> | null;
  started_at: Date | string | null;
  ended_at: Date | string | null;
  created_at: Date | string;
  created_by_key_id: string | null;
}

const COLUMNS = `id, org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider,
  candidate_model, min_n, max_regression, summary, started_at, ended_at, created_at, created_by_key_id`;

/* Newest first, served by experiments_org_created_idx; id breaks ties. */
const LIST_FOR_ORG = `SELECT ${COLUMNS} FROM experiments WHERE org_id = $1 ORDER BY created_at DESC, id DESC`;
const LIST_ACTIVE_FOR_ORG = `SELECT ${COLUMNS} FROM experiments WHERE org_id = $1 AND status = 'active' ORDER BY created_at, id`;
/* The stop-rule job's round: every organisation's running experiments. */
const LIST_ACTIVE = `SELECT ${COLUMNS} FROM experiments WHERE status = 'active' ORDER BY created_at, id`;

/*
 * The one lookup behind rollback's 404 (contract: another organisation's experiment is
 * indistinguishable from a missing one). A malformed id is passed as NULL, which matches nothing,
 * so missing, malformed and foreign ids all take this query and get the same empty answer.
 */
const LOCK_FOR_ORG = `SELECT ${COLUMNS} FROM experiments WHERE id = $1::uuid AND org_id = $2 FOR UPDATE`;
/** The system's own moves (stop rules) act on an id it read itself, whatever the organisation. */
const LOCK_BY_ID = `SELECT ${COLUMNS} FROM experiments WHERE id = $1::uuid FOR UPDATE`;

const INSERT_ACTIVE = `
  INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model,
    candidate_provider, candidate_model, min_n, max_regression, started_at, created_by_key_id)
  VALUES ($1, $2, 'active', $3, $4, $5, $6, $7, $8, $9, now(), $10)
  RETURNING ${COLUMNS}`;

/* Only from a live state: a row that already ended keeps its ended_at and summary. */
const END = `
  UPDATE experiments SET status = $2, ended_at = now(), summary = COALESCE($3::jsonb, summary)
  WHERE id = $1 AND status IN ('draft', 'active')
  RETURNING ${COLUMNS}`;

const INSERT_EVENT = `
  INSERT INTO experiment_events (experiment_id, org_id, kind, actor_api_key_id, detail)
  VALUES ($1, $2, $3, $4, $5::jsonb)`;

/*
 * Create budget without the cache store (ExperimentsService): a transaction-scoped advisory lock per
 * organisation serialises creates of every replica, then the experiments created in the window are
 * counted (experiments_org_created_idx). The two-key form keeps these locks apart from the migrator's.
 */
const LOCK_ORG_CREATES = `SELECT pg_advisory_xact_lock(7301, hashtext($1))`;
const COUNT_CREATED_SINCE = `
  SELECT count(*)::int AS n,
         (EXTRACT(EPOCH FROM (min(created_at) - now())) * 1000 + $2::float8)::float8 AS retry_ms
  FROM experiments
  WHERE org_id = $1 AND created_at > now() - make_interval(secs => $2::float8 / 1000)`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ACTIVE_PAIR_INDEX = 'experiments_one_active_idx';

const date = (v: Date | string): Date => (v instanceof Date ? v : new Date(v));

function toRecord(r: ExperimentRow): ExperimentRecord {
  return {
    id: r.id,
    orgId: r.org_id,
    type: r.type,
    status: r.status,
    trafficPct: Number(r.traffic_pct),
    baseline: { provider: r.baseline_provider, model: r.baseline_model },
    candidate: { provider: r.candidate_provider, model: r.candidate_model },
    stopRule: { minN: Number(r.min_n), maxRegression: Number(r.max_regression) },
    summary: r.summary ?? null,
    startedAt: r.started_at === null ? null : date(r.started_at),
    endedAt: r.ended_at === null ? null : date(r.ended_at),
    createdAt: date(r.created_at),
    createdByKeyId: r.created_by_key_id,
  };
}

/** A unique violation of the one-active-per-pair index (SQLSTATE 23505), on `pg` and on PGlite. */
function isActivePairTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === ACTIVE_PAIR_INDEX;
}

/** Every SQL statement of experiments (tables `experiments`, `experiment_events`). */
@Injectable()
export class ExperimentsRepository {
  constructor(private readonly sql: SqlStore) {}

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.sql.transaction(fn);
  }

  async listForOrg(orgId: string): Promise<ExperimentRecord[]> {
    const { rows } = await this.sql.query<ExperimentRow>(LIST_FOR_ORG, [orgId]);
    return rows.map(toRecord);
  }

  /** `deadlineMs`: a request waits on this read (see QueryOptions). */
  async listActiveForOrg(orgId: string, deadlineMs?: number): Promise<ExperimentRecord[]> {
    const { rows } = await this.sql.query<ExperimentRow>(LIST_ACTIVE_FOR_ORG, [orgId], { deadlineMs });
    return rows.map(toRecord);
  }

  async listActive(): Promise<ExperimentRecord[]> {
    const { rows } = await this.sql.query<ExperimentRow>(LIST_ACTIVE);
    return rows.map(toRecord);
  }

  /** The organisation's experiment, row-locked until the transaction ends; null when there is none (or `id` is no UUID). */
  async lockForOrg(orgId: string, id: string, tx: SqlExecutor): Promise<ExperimentRecord | null> {
    const { rows } = await tx.query<ExperimentRow>(LOCK_FOR_ORG, [UUID.test(id) ? id : null, orgId]);
    return rows.length ? toRecord(rows[0]) : null;
  }

  async lockById(id: string, tx: SqlExecutor): Promise<ExperimentRecord | null> {
    const { rows } = await tx.query<ExperimentRow>(LOCK_BY_ID, [UUID.test(id) ? id : null]);
    return rows.length ? toRecord(rows[0]) : null;
  }

  /**
   * Inserts an active experiment; null when the database refuses it because the organisation already
   * has an active one for the same (baseline, candidate) pair. The transaction is then aborted: the
   * caller must end it (throw), not run more statements in it.
   */
  async insertActive(e: NewExperiment, tx: SqlExecutor): Promise<ExperimentRecord | null> {
    try {
      const { rows } = await tx.query<ExperimentRow>(INSERT_ACTIVE, [
        e.orgId, e.type, e.trafficPct, e.baseline.provider, e.baseline.model, e.candidate.provider, e.candidate.model,
        e.stopRule.minN, e.stopRule.maxRegression, e.createdByKeyId,
      ]);
      return toRecord(rows[0]);
    } catch (err) {
      if (isActivePairTaken(err)) return null;
      throw err;
    }
  }

  /** Moves a draft or active experiment to an end state; null when it had already ended. */
  async end(id: string, status: 'completed' | 'rolled_back', summary: Record<string, unknown> | null, tx: SqlExecutor): Promise<ExperimentRecord | null> {
    const { rows } = await tx.query<ExperimentRow>(END, [id, status, summary === null ? null : JSON.stringify(summary)]);
    return rows.length ? toRecord(rows[0]) : null;
  }

  async insertEvent(e: ExperimentEvent, tx: SqlExecutor): Promise<void> {
    await tx.query(INSERT_EVENT, [e.experimentId, e.orgId, e.kind, e.actorApiKeyId, e.detail === null ? null : JSON.stringify(e.detail)]);
  }

  /**
   * Takes the organisation's create lock for the rest of the transaction and counts the experiments
   * it created in the last `windowMs`; `retryAfterMs` is when the oldest of them leaves the window.
   */
  async lockAndCountCreates(orgId: string, windowMs: number, tx: SqlExecutor): Promise<{ count: number; retryAfterMs: number }> {
    await tx.query(LOCK_ORG_CREATES, [orgId]);
    const { rows } = await tx.query<{ n: number; retry_ms: number | null }>(COUNT_CREATED_SINCE, [orgId, windowMs]);
    return { count: Number(rows[0]?.n ?? 0), retryAfterMs: Math.max(0, Number(rows[0]?.retry_ms ?? 0)) };
  }
}

/** The row shape and its mapping, for the Admin API's read-only repository of these tables (src/admin/experiments). */
export { COLUMNS as EXPERIMENT_COLUMNS, toRecord as toExperimentRecord, type ExperimentRow };
