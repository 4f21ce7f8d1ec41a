import { Pool, types as pgTypes, type CustomTypesConfig, type PoolClient } from 'pg';
import Cursor from 'pg-cursor';
import { withTimeout } from '../stores/with-timeout';
import { ExportRow, KindSchema } from './export-schema';
import { ExportSource, HAS_TXID, StepRead, stepSql, XMIN } from './export-source';

/** Above this many rows (the planner's estimate) a step is read without a sort (see `read`). */
const FAST_START_ROWS = 100_000;

/*
 * json and jsonb stay the text the server sent: every format writes JSON text, so parsing it into
 * objects only to serialise them again would be most of the work on a wide row.
 */
const RAW_JSON = new Set([114, 3802]);
const TYPES = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') => (RAW_JSON.has(oid) ? (s: string) => s : pgTypes.getTypeParser(oid, format ?? 'text')),
} as unknown as CustomTypesConfig;

export interface PgExportSourceOptions {
  connectionTimeoutMs?: number;
  /** How long one batch may take to arrive (the first one waits for the server's sort of the step). */
  readTimeoutMs?: number;
  applicationName?: string;
  /** Connections (default one: a sidecar reads one step at a time). */
  max?: number;
  /** Steps estimated above this many rows are read without a sort (default FAST_START_ROWS). */
  fastStartRows?: number;
}

/** Postgres through `pg-cursor` on a pool of one (see ExportSource). */
export class PgExportSource implements ExportSource {
  readonly kind = 'postgres' as const;
  private readonly pool: Pool;
  private readonly readTimeoutMs: number;
  private readonly fastStartRows: number;

  constructor(url: string, options: PgExportSourceOptions = {}) {
    this.readTimeoutMs = options.readTimeoutMs ?? 300_000;
    this.fastStartRows = options.fastStartRows ?? FAST_START_ROWS;
    this.pool = new Pool({
      connectionString: url,
      max: options.max ?? 1,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
      idleTimeoutMillis: 30_000,
      // A cursor's statement lasts until it is closed, however slowly its reader takes the rows (a
      // stdout pipe, an HTTP client): no server-side cap. Each batch has a client-side one instead,
      // which also covers a server that stopped answering.
      statement_timeout: 0,
      // A large step is read in a transaction (see `read`) whose reader may pause on a slow consumer.
      idle_in_transaction_session_timeout: 3_600_000,
      options: '-c TimeZone=UTC',
      application_name: options.applicationName ?? 'routing-gateway-export',
      keepAlive: true,
    });
    // A backend killed or a server restarted between two reads: the pool drops the idle client.
    this.pool.on('error', () => undefined);
  }

  async xmin(): Promise<bigint> {
    const { rows } = await withTimeout(this.pool.query<{ xmin: string }>(XMIN), this.readTimeoutMs, 'Postgres');
    return BigInt(rows[0].xmin);
  }

  async ready(schema: KindSchema): Promise<boolean> {
    const { rows } = await withTimeout(this.pool.query<{ n: number }>(HAS_TXID, [schema.table]), this.readTimeoutMs, 'Postgres');
    return rows[0].n > 0;
  }

  async *read(step: StepRead, batchRows: number): AsyncGenerator<ExportRow[]> {
    const client: PoolClient = await this.pool.connect();
    let broken: Error | undefined;
    const onError = (err: Error) => (broken ??= err);
    client.on('error', onError);
    const { sql, params } = stepSql(step);
    let inTransaction = false;
    try {
      if ((await this.estimate(client, sql, params)) > this.fastStartRows) {
        // A large step (the first one, all of history; a catch-up after days away): ordering it
        // whole would make the server sort every row (gigabytes spilled to disk) before sending the
        // first one. Without sorts the planner walks each day's (created_at, id) key in order and
        // merges them, and rows flow at once. Small steps keep the default plan (the txid index, then
        // a sort of a few rows). Only for this statement, on this connection of the export's own.
        await withTimeout(client.query('BEGIN'), this.readTimeoutMs, 'Postgres');
        inTransaction = true;
        await withTimeout(client.query('SET LOCAL enable_sort = off'), this.readTimeoutMs, 'Postgres');
      }
    } catch (err) {
      broken ??= err as Error;
      client.off('error', onError);
      client.release(broken);
      throw err;
    }
    const cursor = client.query(new Cursor<ExportRow>(sql, params, { rowMode: 'array', types: TYPES }));
    const fetch = (): Promise<ExportRow[]> => {
      const p = withTimeout(cursor.read(batchRows), this.readTimeoutMs, 'Postgres');
      p.catch((err: Error) => (broken ??= err));
      return p;
    };
    // One batch is read ahead while the caller encodes and writes the one before: the server and
    // this process work at the same time instead of in turns.
    let next: Promise<ExportRow[]> | null = fetch();
    try {
      while (next) {
        const rows: ExportRow[] = await next;
        next = rows.length === batchRows ? fetch() : null;
        if (rows.length > 0) yield rows;
      }
    } finally {
      // A caller that stopped early leaves a read in flight: it must end before the cursor closes.
      if (next) await next.catch(() => undefined);
      if (!broken) await withTimeout(cursor.close(), 10_000, 'Postgres').catch((err: Error) => (broken ??= err));
      if (!broken && inTransaction) await withTimeout(client.query('COMMIT'), 10_000, 'Postgres').catch((err: Error) => (broken ??= err));
      if (!broken) client.off('error', onError);
      // A broken connection is destroyed rather than pooled.
      client.release(broken);
    }
  }

  /** The planner's estimate of the step's rows (no rows are read). */
  private async estimate(client: PoolClient, sql: string, params: unknown[]): Promise<number> {
    const { rows } = await withTimeout(client.query<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }>(`EXPLAIN (FORMAT JSON) ${sql}`, params), this.readTimeoutMs, 'Postgres');
    return Number(rows[0]['QUERY PLAN'][0].Plan['Plan Rows']);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
