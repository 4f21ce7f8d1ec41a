import { Injectable } from '@nestjs/common';
import { SqlStore } from '../../stores/sql/sql-store';

/** What a search may ask (every field optional but the organisation and the time range). */
export interface TraceSearch {
  orgId: string;
  /** Half-open [from, to) on created_at: only those days' partitions are read. */
  from: Date;
  to: Date;
  requestId: string | null;
  sessionId: string | null;
  model: string | null;
  provider: string | null;
  /** An exact status, or the first status of a class (200 for 2xx). */
  status: number | null;
  statusClass: number | null;
  errorCode: string | null;
  experimentId: string | null;
  arm: string | null;
  /** Rows strictly older than this key (created_at in µs since the epoch, id), newest first. */
  after: { atUs: string; id: string } | null;
  limit: number;
}

/** One row of `decision_traces` as the Admin API reads it; ids and numbers only (there is no text of the request to read). */
export interface TraceRow {
  atUs: string;
  id: string;
  createdAt: Date;
  requestId: string;
  apiKeyId: string;
  sessionId: string | null;
  endpoint: string;
  requestedModel: string;
  route: string | null;
  strategy: string | null;
  selectedProvider: string | null;
  selectedModel: string | null;
  fallbackUsed: boolean;
  attempts: number;
  experimentId: string | null;
  experimentArm: string | null;
  status: number;
  errorCode: string | null;
  latencyMs: number;
  ttftMs: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  reasoningTokens: number | null;
  costUsd: number | null;
  finishReason: string | null;
  candidates: Array<{ provider: string; model: string; score: number | null }> | null;
  filtered: Array<{ provider: string; model: string; reason: string }> | null;
  failedAttempts: Array<{ provider: string; model: string; error: string; status: number | null }> | null;
}

const COLUMNS = `(extract(epoch FROM created_at) * 1000000)::bigint::text AS at_us, id::text AS id, created_at,
  request_id, api_key_id, session_id, endpoint, requested_model, route, strategy, selected_provider, selected_model,
  fallback_used, attempts, experiment_id::text AS experiment_id, experiment_arm, status, error_code, latency_ms, ttft_ms,
  prompt_tokens, completion_tokens, reasoning_tokens, cost_usd, finish_reason, candidates, filtered, failed_attempts`;

/* A trace's key as the API names it: created_at in µs since the epoch, exactly (no float on the way). */
const AT_US = (p: string) => `(timestamptz '1970-01-01 00:00:00+00' + ${p}::bigint * interval '1 microsecond')`;

/*
 * Search (docs/api.md "Admin API", traces): the organisation's traces in [$2, $3), newest first,
 * filtered by whichever of $4..$12 is set, after the cursor's key ($13, $14). The range on created_at
 * lets Postgres read only the partitions (UTC days) of the range, and the key (created_at, id) orders
 * and pages them.
 */
const SEARCH = `
  SELECT ${COLUMNS} FROM decision_traces
  WHERE org_id = $1 AND created_at >= $2::timestamptz AND created_at < $3::timestamptz
    AND ($4::text IS NULL OR request_id = $4::text)
    AND ($5::text IS NULL OR session_id = $5::text)
    AND ($6::text IS NULL OR selected_model = $6::text)
    AND ($7::text IS NULL OR selected_provider = $7::text)
    AND ($8::integer IS NULL OR status = $8::integer)
    AND ($9::integer IS NULL OR status BETWEEN $9::integer AND $9::integer + 99)
    AND ($10::text IS NULL OR error_code = $10::text)
    AND ($11::uuid IS NULL OR experiment_id = $11::uuid)
    AND ($12::text IS NULL OR experiment_arm = $12::text)
    AND ($13::bigint IS NULL OR (created_at, id) < (${AT_US('$13')}, $14::bigint))
  ORDER BY created_at DESC, id DESC
  LIMIT $15`;

/* One trace by its key, in the organisation: a primary-key read of one partition. */
const FIND = `SELECT ${COLUMNS} FROM decision_traces WHERE org_id = $1 AND created_at = ${AT_US('$2')} AND id = $3::bigint`;

interface Row {
  at_us: string;
  id: string;
  created_at: Date | string;
  request_id: string;
  api_key_id: string;
  session_id: string | null;
  endpoint: string;
  requested_model: string;
  route: string | null;
  strategy: string | null;
  selected_provider: string | null;
  selected_model: string | null;
  fallback_used: boolean;
  attempts: number;
  experiment_id: string | null;
  experiment_arm: string | null;
  status: number;
  error_code: string | null;
  latency_ms: number;
  ttft_ms: number | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  reasoning_tokens: number | null;
  cost_usd: number | null;
  finish_reason: string | null;
  candidates: TraceRow['candidates'] | string | null;
  filtered: TraceRow['filtered'] | string | null;
  failed_attempts: TraceRow['failedAttempts'] | string | null;
}

const json = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);
const numOrNull = (v: number | string | null): number | null => (v === null ? null : Number(v));

function toTraceRow(r: Row): TraceRow {
  return {
    atUs: r.at_us,
    id: r.id,
    createdAt: r.created_at instanceof Date ? r.created_at : new Date(r.created_at),
    requestId: r.request_id,
    apiKeyId: r.api_key_id,
    sessionId: r.session_id,
    endpoint: r.endpoint,
    requestedModel: r.requested_model,
    route: r.route,
    strategy: r.strategy,
    selectedProvider: r.selected_provider,
    selectedModel: r.selected_model,
    fallbackUsed: r.fallback_used,
    attempts: Number(r.attempts),
    experimentId: r.experiment_id,
    experimentArm: r.experiment_arm,
    status: Number(r.status),
    errorCode: r.error_code,
    latencyMs: Number(r.latency_ms),
    ttftMs: numOrNull(r.ttft_ms),
    promptTokens: numOrNull(r.prompt_tokens),
    completionTokens: numOrNull(r.completion_tokens),
    reasoningTokens: numOrNull(r.reasoning_tokens),
    costUsd: numOrNull(r.cost_usd),
    finishReason: r.finish_reason,
    candidates: json(r.candidates),
    filtered: json(r.filtered),
    failedAttempts: json(r.failed_attempts),
  };
}

/** The Admin API's reads of `decision_traces`. */
@Injectable()
export class AdminTracesRepository {
  constructor(private readonly sql: SqlStore) {}

  async search(q: TraceSearch): Promise<TraceRow[]> {
    const { rows } = await this.sql.query<Row>(SEARCH, [
      q.orgId,
      q.from.toISOString(),
      q.to.toISOString(),
      q.requestId,
      q.sessionId,
      q.model,
      q.provider,
      q.status,
      q.statusClass,
      q.errorCode,
      q.experimentId,
      q.arm,
      q.after?.atUs ?? null,
      q.after?.id ?? null,
      q.limit,
    ]);
    return rows.map(toTraceRow);
  }

  /** The organisation's trace of this key; null when it has none. */
  async find(orgId: string, atUs: string, id: string): Promise<TraceRow | null> {
    const { rows } = await this.sql.query<Row>(FIND, [orgId, atUs, id]);
    return rows.length ? toTraceRow(rows[0]) : null;
  }
}
