import { isPostgresOutage } from '../stores/sql/postgres-outage';
import type { SqlStore } from '../stores/sql/sql-store';
import { StoreTimeoutError } from '../stores/with-timeout';
import { ExportRow, KindSchema } from './export-schema';
import type { PgExportSource, PgExportSourceOptions } from './pg-export-source';

/**
 * The analytics store as the export reads it (docs/operations.md "Decisions export"): the snapshot
 * bound of a step and the step's rows in bounded batches, memory flat whatever the backlog. Postgres
 * is read through a server-side cursor on a pool of one connection of the export's own, so an export
 * never takes a connection the request path is waiting for (PgExportSource, in pg-export-source.ts:
 * loaded only for a Postgres store, so the embedded gateway never loads `pg`); the embedded store
 * (one process, one connection) through keyset batches of its SqlStore, each a short query between
 * the gateway's own.
 */
export interface ExportSource {
  readonly kind: 'postgres' | 'pglite';
  /** X = pg_snapshot_xmin(pg_current_snapshot()): every transaction below it has ended. */
  xmin(): Promise<bigint>;
  /** Whether the store has the txid columns the export reads by (its migrations ran). */
  ready(schema: KindSchema): Promise<boolean>;
  /** The step's rows after `after`, in (created_at, id) order, in batches of at most `batchRows`. */
  read(step: StepRead, batchRows: number): AsyncGenerator<ExportRow[]>;
  close(): Promise<void>;
}

export interface StepRead {
  schema: KindSchema;
  /** Rows with txid in [lo, hi); lo = 0 also takes the rows stamped before txids existed (NULL). */
  lo: bigint;
  hi: bigint;
  /** Rows after this (created_at µs, id) of the step; (0, 0): from its start. */
  after: { atUs: bigint; id: bigint };
  orgId?: string;
  /** Half-open [since, until) on created_at. */
  since?: Date;
  until?: Date;
}

/** The SQL of a step read; `limit` for keyset batches. Identifiers come from the schema constants, values are parameters. */
export function stepSql(r: StepRead, limit?: number): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const where =
    r.lo === 0n ? [`(t.txid IS NULL OR t.txid < ${p(String(r.hi))}::bigint)`] : [`t.txid >= ${p(String(r.lo))}::bigint`, `t.txid < ${p(String(r.hi))}::bigint`];
  if (r.after.atUs !== 0n || r.after.id !== 0n) {
    where.push(`(t.created_at, t.id) > (timestamptz '1970-01-01 00:00:00+00' + ${p(String(r.after.atUs))}::bigint * interval '1 microsecond', ${p(String(r.after.id))}::bigint)`);
  }
  if (r.orgId !== undefined) where.push(`t.org_id = ${p(r.orgId)}`);
  if (r.since) where.push(`t.created_at >= ${p(r.since.toISOString())}::timestamptz`);
  if (r.until) where.push(`t.created_at < ${p(r.until.toISOString())}::timestamptz`);
  const cols = r.schema.columns.map((c) => `${c.sql} AS ${c.name}`).join(', ');
  // Ordered by the table's own columns, qualified: the output columns `created_at` and `id` are their
  // text forms, which ORDER BY would otherwise pick (text order, and no index to walk).
  const sql = `SELECT ${cols} FROM ${r.schema.table} t WHERE ${where.join(' AND ')} ORDER BY t.created_at, t.id${limit === undefined ? '' : ` LIMIT ${p(limit)}`}`;
  return { sql, params };
}

export const XMIN = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`;
export const HAS_TXID = `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'txid'`;

/**
 * The Postgres source (the admin export's and the CLI's). `pg` is required here, not imported at the
 * top: an embedded gateway never loads it (docs/architecture.md "Memory: what an idle gateway holds").
 */
export function postgresExportSource(url: string, options?: PgExportSourceOptions): PgExportSource {
  const { PgExportSource } = require('./pg-export-source') as typeof import('./pg-export-source');
  return new PgExportSource(url, options);
}

/** A store call that did not answer, or answered that it cannot: wait and try again. */
export function isStoreOutage(err: unknown): boolean {
  return err instanceof StoreTimeoutError || isPostgresOutage(err);
}

/** The embedded store (or any SqlStore) through keyset batches (see ExportSource). */
export class KeysetExportSource implements ExportSource {
  readonly kind: 'postgres' | 'pglite';

  constructor(
    private readonly store: SqlStore,
    private readonly owned = false,
  ) {
    this.kind = store.kind;
  }

  async xmin(): Promise<bigint> {
    const { rows } = await this.store.query<{ xmin: string }>(XMIN, []);
    return BigInt(rows[0].xmin);
  }

  async ready(schema: KindSchema): Promise<boolean> {
    const { rows } = await this.store.query<{ n: number }>(HAS_TXID, [schema.table]);
    return Number(rows[0].n) > 0;
  }

  async *read(step: StepRead, batchRows: number): AsyncGenerator<ExportRow[]> {
    let after = step.after;
    const names = step.schema.columns.map((c) => c.name);
    for (;;) {
      const { sql, params } = stepSql({ ...step, after }, batchRows);
      const { rows } = await this.store.query<Record<string, unknown>>(sql, params);
      if (rows.length === 0) return;
      const batch = rows.map((r) => names.map((n) => r[n]));
      yield batch;
      if (rows.length < batchRows) return;
      const last = batch[batch.length - 1];
      after = { atUs: BigInt(last[2] as string), id: BigInt(last[1] as string) };
    }
  }

  async close(): Promise<void> {
    if (this.owned) await this.store.close();
  }
}
