/**
 * The record kinds the decisions export writes, one versioned schema each (docs/operations.md
 * "Decisions export"): their columns, types and the SQL that reads them. A change of a column's name,
 * type or meaning is a new `schema_version`; a new column at the end is not (readers ignore what they
 * do not know). Ids, codes and numbers only: the analytics store holds no prompt or completion text,
 * and no column here reads a key or its hash.
 */
export const EXPORT_KINDS = ['traces', 'events', 'key_audit'] as const;
export type ExportKind = (typeof EXPORT_KINDS)[number];

/**
 * int64: a decimal string from SQL (ids stay below 2^53, so NDJSON writes them as numbers);
 * timestamp: microseconds since the epoch, a decimal string from SQL; json: the JSON text (Postgres)
 * or the parsed value (the embedded store), which the encoders take alike (`jsonText`).
 */
export type ColumnType = 'int64' | 'int32' | 'double' | 'bool' | 'string' | 'timestamp' | 'json';

export interface ExportColumn {
  name: string;
  type: ColumnType;
  nullable: boolean;
  /** The SQL expression read for it (the row's own columns; `$schema_version` is a constant). */
  sql: string;
}

export interface KindSchema {
  kind: ExportKind;
  version: number;
  table: string;
  columns: readonly ExportColumn[];
}

const col = (name: string, type: ColumnType, nullable: boolean, sql = name): ExportColumn => ({ name, type, nullable, sql });
const version = (v: number): ExportColumn => col('schema_version', 'int32', false, String(v));
/** µs since the epoch, exact (extract(epoch) is numeric, not a double, on Postgres 14+ and PGlite). */
const MICROS = `(extract(epoch FROM created_at) * 1000000)::bigint::text`;

const TRACES: KindSchema = {
  kind: 'traces',
  version: 1,
  table: 'decision_traces',
  columns: [
    version(1),
    col('id', 'int64', false, 'id::text'),
    col('created_at', 'timestamp', false, MICROS),
    col('org_id', 'string', false),
    col('request_id', 'string', false),
    col('api_key_id', 'string', false),
    col('session_id', 'string', true),
    col('endpoint', 'string', false),
    col('requested_model', 'string', false),
    col('route', 'string', true),
    col('strategy', 'string', true),
    col('selected_provider', 'string', true),
    col('selected_model', 'string', true),
    col('experiment_id', 'string', true, 'experiment_id::text'),
    col('experiment_arm', 'string', true),
    col('status', 'int32', false),
    col('error_code', 'string', true),
    col('finish_reason', 'string', true),
    col('fallback_used', 'bool', false),
    col('attempts', 'int32', false),
    col('latency_ms', 'double', false),
    col('ttft_ms', 'double', true),
    col('prompt_tokens', 'int32', true),
    col('completion_tokens', 'int32', true),
    col('reasoning_tokens', 'int32', true),
    col('cost_usd', 'double', true),
    col('candidates', 'json', true),
    col('filtered', 'json', true),
    col('failed_attempts', 'json', true),
  ],
};

const EVENTS: KindSchema = {
  kind: 'events',
  version: 1,
  table: 'experiment_events',
  columns: [
    version(1),
    col('id', 'int64', false, 'id::text'),
    col('created_at', 'timestamp', false, MICROS),
    col('org_id', 'string', false),
    col('experiment_id', 'string', false, 'experiment_id::text'),
    col('kind', 'string', false),
    col('actor_key_id', 'string', true, 'actor_api_key_id'),
    col('detail', 'json', true),
  ],
};

const KEY_AUDIT: KindSchema = {
  kind: 'key_audit',
  version: 1,
  table: 'key_audit',
  columns: [
    version(1),
    col('id', 'int64', false, 'id::text'),
    col('created_at', 'timestamp', false, MICROS),
    col('org_id', 'string', false),
    col('key_id', 'string', false),
    col('action', 'string', false),
    col('actor', 'string', false),
    col('actor_key_id', 'string', true),
    col('detail', 'json', true),
  ],
};

export const SCHEMAS: Readonly<Record<ExportKind, KindSchema>> = { traces: TRACES, events: EVENTS, key_audit: KEY_AUDIT };

/** Where `id` and `created_at` sit in a row (every kind has both): what a position is made of. */
export const ID_INDEX = 1;
export const CREATED_INDEX = 2;

/** A row as read: one value per column of its kind's schema, in order. */
export type ExportRow = unknown[];

/** `created_at` (µs since the epoch, decimal) as ISO 8601 UTC with its microseconds. */
export function microsToIso(us: string): string {
  const n = BigInt(us);
  const ms = n / 1000n;
  const rest = Number(((n % 1000n) + 1000n) % 1000n);
  const floorMs = n < 0n && rest !== 0 ? ms - 1n : ms;
  return `${new Date(Number(floorMs)).toISOString().slice(0, 23)}${String(rest).padStart(3, '0')}Z`;
}

/** A json column's value as JSON text, whichever way the store handed it over. */
export const jsonText = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
