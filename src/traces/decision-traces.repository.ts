import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';
import { DecisionTrace, DecisionTraceSink } from './decision-trace';
import { isTraceId, newTraceId } from './trace-id';

/*
 * One statement per batch: constant text, one array parameter per column, so the plan is reused and
 * no value is ever spliced into SQL. The key is (created_at, id), both made when the trace was built:
 * a batch written again (a retry after a lost answer, a replayed journal) finds its rows there and
 * adds nothing, so writing is idempotent.
 */
const INSERT_TRACES = `
  INSERT INTO decision_traces (
    request_id, org_id, api_key_id, session_id, endpoint, requested_model, route, strategy, candidates,
    selected_provider, selected_model, fallback_used, attempts, experiment_id, experiment_arm,
    status, error_code, latency_ms, ttft_ms, prompt_tokens, completion_tokens, reasoning_tokens,
    cost_usd, finish_reason, created_at, failed_attempts, id, filtered)
  SELECT * FROM unnest(
    $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::jsonb[],
    $10::text[], $11::text[], $12::boolean[], $13::integer[], $14::uuid[], $15::text[],
    $16::integer[], $17::text[], $18::float8[], $19::float8[], $20::integer[], $21::integer[], $22::integer[],
    $23::float8[], $24::text[], $25::timestamptz[], $26::jsonb[], $27::bigint[], $28::jsonb[])
  ON CONFLICT DO NOTHING`;

const COLUMNS = 28;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INT_MAX = 2_147_483_647;

const num = (v: number | null | undefined): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const int = (v: number | null | undefined): number | null => {
  const n = num(v);
  return n === null ? null : Math.max(-INT_MAX, Math.min(INT_MAX, Math.round(n)));
};
// Postgres text cannot hold NUL.
const str = (v: unknown): string => String(v).replace(/\u0000/g, '');
const text = (v: string | null | undefined): string | null => (typeof v === 'string' ? str(v) : null);

/** Only the four fields of each failed attempt are stored (no upstream text can ride along); none is NULL. */
function failedAttemptsJson(list: DecisionTrace['failedAttempts']): string | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  return JSON.stringify(list.map((a) => ({ provider: str(a.provider), model: str(a.model), error: str(a.error), status: int(a.status) })));
}

/** The filtered targets: provider, model and reason only; none is NULL. */
function filteredJson(list: DecisionTrace['filtered']): string | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  return JSON.stringify(list.map((f) => ({ provider: str(f.provider), model: str(f.model), reason: str(f.reason) })));
}

/*
 * A trace becomes one row of column values. Values the table would refuse become NULL (or a neutral
 * value for NOT NULL columns) instead: one malformed trace must never make its whole batch fail. A
 * trace without a usable id or time gets them here, and so is stored once per write, not once.
 */
function toRow(t: DecisionTrace): unknown[] {
  const created = t.createdAt instanceof Date && !Number.isNaN(t.createdAt.getTime()) ? t.createdAt : new Date();
  return [
    str(t.requestId),
    str(t.orgId),
    str(t.apiKeyId),
    text(t.sessionId),
    str(t.endpoint),
    str(t.requestedModel),
    text(t.route),
    text(t.strategy),
    Array.isArray(t.candidates) ? JSON.stringify(t.candidates.map((c) => ({ provider: str(c.provider), model: str(c.model), score: num(c.score) }))) : null,
    text(t.selectedProvider),
    text(t.selectedModel),
    t.fallbackUsed === true,
    int(t.attempts) ?? 0,
    typeof t.experimentId === 'string' && UUID.test(t.experimentId) ? t.experimentId : null,
    text(t.experimentArm),
    int(t.status) ?? 0,
    text(t.errorCode),
    num(t.latencyMs) ?? 0,
    num(t.ttftMs),
    int(t.promptTokens),
    int(t.completionTokens),
    int(t.reasoningTokens),
    num(t.costUsd),
    text(t.finishReason),
    created.toISOString(),
    failedAttemptsJson(t.failedAttempts),
    isTraceId(t.id) ? t.id : newTraceId(created.getTime()),
    filteredJson(t.filtered),
  ];
}

/** Decision traces in the analytics store (table `decision_traces`). */
@Injectable()
export class DecisionTracesRepository extends DecisionTraceSink {
  constructor(private readonly sql: SqlStore) {
    super();
  }

  async write(traces: readonly DecisionTrace[]): Promise<void> {
    if (traces.length === 0) return;
    const columns: unknown[][] = Array.from({ length: COLUMNS }, () => new Array<unknown>(traces.length));
    traces.forEach((t, i) => toRow(t).forEach((v, c) => (columns[c][i] = v)));
    await this.sql.query(INSERT_TRACES, columns);
  }
}
