import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';
import { DecisionTrace, DecisionTraceSink } from './decision-trace';
import { isTraceId, newTraceId } from './trace-id';

/** The table's columns in the order each row lists its values (toRow), with the type each is read as. */
const COLUMNS = [
  ['request_id', 'text'], ['org_id', 'text'], ['api_key_id', 'text'], ['session_id', 'text'], ['endpoint', 'text'],
  ['requested_model', 'text'], ['route', 'text'], ['strategy', 'text'], ['candidates', 'jsonb'],
  ['selected_provider', 'text'], ['selected_model', 'text'], ['fallback_used', 'boolean'], ['attempts', 'integer'],
  ['experiment_id', 'uuid'], ['experiment_arm', 'text'], ['status', 'integer'], ['error_code', 'text'],
  ['latency_ms', 'float8'], ['ttft_ms', 'float8'], ['prompt_tokens', 'integer'], ['completion_tokens', 'integer'],
  ['reasoning_tokens', 'integer'], ['cost_usd', 'float8'], ['finish_reason', 'text'], ['created_at', 'timestamptz'],
  ['failed_attempts', 'jsonb'], ['id', 'bigint'], ['filtered', 'jsonb'],
] as const;

/*
 * One statement per batch: constant text and one parameter, the batch as JSON (an array of rows,
 * each the array of its column values), so the plan is reused and no value is ever spliced into
 * SQL. `->>` reads a JSON null as NULL and a list as its JSON text, so every column is its element
 * cast. One JSON text instead of one array parameter per column: the driver sends a string as it is
 * (PGlite's and pg's encoders escaped every element of every array in JavaScript, a quarter of the
 * embedded store's thread on the chat benchmark, and 28 arrays were cloned into its worker), and
 * the server reads it in half the time of 28 array literals. Read as `jsonb`: parsed once, each
 * element then found by its index, where `json`'s `->>` scans the row's text again for every column
 * (on PGlite, 500-row batches into the table with its indexes: 97 → 31 µs per row). The key is
 * (created_at, id), both made when the trace was built: a batch written again (a retry after a lost
 * answer, a replayed journal) finds its rows there and adds nothing, so writing is idempotent.
 */
const INSERT_TRACES = `
  INSERT INTO decision_traces (${COLUMNS.map(([name]) => name).join(', ')})
  SELECT ${COLUMNS.map(([, type], i) => `(r->>${i})::${type}`).join(', ')}
  FROM jsonb_array_elements($1::jsonb) AS r
  ON CONFLICT DO NOTHING`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INT_MAX = 2_147_483_647;

const num = (v: number | null | undefined): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const int = (v: number | null | undefined): number | null => {
  const n = num(v);
  return n === null ? null : Math.max(-INT_MAX, Math.min(INT_MAX, Math.round(n)));
};
/*
 * Postgres text cannot hold NUL, and its JSON reader refuses a lone UTF-16 surrogate (one half of a
 * pair, which only a broken client sends): NUL goes, a lone half becomes U+FFFD, as encoding the
 * string to UTF-8 makes of it.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const str = (v: unknown): string => String(v).replace(UNSTORABLE, (c) => (c === '\u0000' ? '' : '\ufffd'));
const text = (v: string | null | undefined): string | null => (typeof v === 'string' ? str(v) : null);

/** Only the four fields of each failed attempt are stored (no upstream text can ride along); none is NULL. */
function failedAttemptsJson(list: DecisionTrace['failedAttempts']): object[] | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  return list.map((a) => ({ provider: str(a.provider), model: str(a.model), error: str(a.error), status: int(a.status) }));
}

/** The filtered targets: provider, model and reason only; none is NULL. */
function filteredJson(list: DecisionTrace['filtered']): object[] | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  return list.map((f) => ({ provider: str(f.provider), model: str(f.model), reason: str(f.reason) }));
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
    Array.isArray(t.candidates) ? t.candidates.map((c) => ({ provider: str(c.provider), model: str(c.model), score: num(c.score) })) : null,
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
    await this.sql.query(INSERT_TRACES, [JSON.stringify(traces.map(toRow))]);
  }
}
