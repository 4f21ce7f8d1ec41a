import { Injectable } from '@nestjs/common';
import { SqlExecutor, SqlStore } from '../stores/sql/sql-store';
import { DAY_MS, DEFAULT_PARTITION, dayPartitionName, midnightLiteral, parsePartitionBound, PartitionBound } from './partition-days';

export interface TracePartition {
  name: string;
  /** null: a bound of a shape the gateway never makes (left alone). */
  bound: PartitionBound | null;
}

/*
 * Retention's statements on `decision_traces` (migration 0005) and on the tables it prunes by age.
 * Replicas all run the retention job: a transaction-scoped advisory lock lets one of them do a step
 * while the others skip it (the CLI waits for it instead); COMMIT or ROLLBACK releases it. Every
 * step is also safe to repeat: IF NOT EXISTS, IF EXISTS, a DELETE of what is still there.
 *
 * Creating and dropping a partition take a short ACCESS EXCLUSIVE lock on `decision_traces`: a
 * reader already running (a long aggregation) would make the step wait and every later statement
 * queue behind it. lock_timeout bounds that wait; a step that times out is retried on the next run
 * (partitions are made a week ahead, so a missed run changes nothing).
 */
const LOCK_KEY = 'routing-gateway:retention';
const TRY_LOCK = `SELECT pg_try_advisory_xact_lock(hashtext('${LOCK_KEY}')) AS locked`;
const WAIT_LOCK = `SELECT true AS locked FROM pg_advisory_xact_lock(hashtext('${LOCK_KEY}'))`;
const LOCK_TIMEOUT = `SET LOCAL lock_timeout = '3s'`;
/** SQLSTATE of a lock not granted within lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';

/* Bounds are read back as text: fixed output settings make that text independent of the session. */
const LIST = `
  SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'decision_traces'::regclass
   ORDER BY c.relname`;

const COLUMNS = `
  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) AS list
    FROM pg_attribute WHERE attrelid = 'decision_traces'::regclass AND attnum > 0 AND NOT attisdropped`;

/*
 * Summaries for the page ranges of a partition's BRIN indexes (txid, request and session ids) that
 * have none. Autosummarize and VACUUM summarize a range only once it is full, so a day's partition
 * keeps its last, partly filled range unsummarized after the day is over, and every read by txid or
 * id (each learning beat reads the new traces by txid) reads that range of every day in the window
 * whole: at a million traces, a third of a beat. brin_summarize_new_values summarizes it too; a
 * partition already summarized costs a walk of its range map.
 */
const SUMMARIZE = `
  SELECT COALESCE(sum(brin_summarize_new_values(i.indexrelid)), 0)::int AS ranges
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
   WHERE i.indrelid = to_regclass($1) AND a.amname = 'brin'`;

/* Partition names come from the catalog or from dayPartitionName: checked before they reach DDL, which takes no parameters. */
const NAME = /^decision_traces_[a-z0-9_]+$/;
function ident(name: string): string {
  if (!NAME.test(name)) throw new Error(`not a decision_traces partition name: ${name}`);
  return name;
}

@Injectable()
export class TracePartitionsRepository {
  constructor(private readonly sql: SqlStore) {}

  /**
   * Runs `fn` in a transaction holding the retention lock (with lock_timeout set). 'busy' (nothing
   * done): another replica holds the retention lock and `wait` is false, or a table lock `fn` needed
   * was not granted within lock_timeout (a long reader holds it).
   */
  async locked<T>(wait: boolean, fn: (tx: SqlExecutor) => Promise<T>): Promise<T | 'busy'> {
    try {
      return await this.sql.transaction(async (tx) => {
        const { rows } = await tx.query<{ locked: boolean }>(wait ? WAIT_LOCK : TRY_LOCK, []);
        if (!rows[0]?.locked) return 'busy' as const;
        await tx.query(LOCK_TIMEOUT, []);
        return fn(tx);
      });
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === LOCK_NOT_AVAILABLE) return 'busy';
      throw err;
    }
  }

  /** Every partition of decision_traces with its bounds. */
  async list(): Promise<TracePartition[]> {
    return this.sql.transaction(async (tx) => {
      await tx.query(`SET LOCAL TimeZone = 'UTC'`, []);
      await tx.query(`SET LOCAL DateStyle = 'ISO, YMD'`, []);
      const { rows } = await tx.query<{ name: string; bound: string }>(LIST, []);
      return rows.map((r) => ({ name: r.name, bound: parsePartitionBound(r.bound) }));
    });
  }

  /** Traces in a partition (all of them) or in the default partition before `before`, and the partition's bytes on disk. */
  async measure(name: string, before?: Date): Promise<{ rows: number; bytes: number }> {
    const where = before ? 'WHERE created_at < $1' : '';
    const { rows } = await this.sql.query<{ rows: number; bytes: number | string }>(
      `SELECT (SELECT count(*)::int FROM ${ident(name)} ${where}) AS rows, pg_total_relation_size('${ident(name)}'::regclass) AS bytes`,
      before ? [before.toISOString()] : [],
    );
    return { rows: rows[0].rows, bytes: Number(rows[0].bytes) };
  }

  /**
   * Creates the UTC day's partition. `exists`: it was already there. `occupied`: the default
   * partition holds traces of that day, so the partition must be made by `adoptDay` instead.
   */
  async createDay(tx: SqlExecutor, dayMs: number): Promise<'created' | 'exists' | 'occupied'> {
    const name = ident(dayPartitionName(dayMs));
    if (await this.exists(tx, name)) return 'exists';
    const { rows } = await tx.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${DEFAULT_PARTITION} WHERE created_at >= ${midnightLiteral(dayMs)} AND created_at < ${midnightLiteral(dayMs + DAY_MS)}`,
      [],
    );
    if (rows[0].n > 0) return 'occupied';
    await tx.query(
      `CREATE TABLE IF NOT EXISTS ${name} PARTITION OF decision_traces FOR VALUES FROM (${midnightLiteral(dayMs)}) TO (${midnightLiteral(dayMs + DAY_MS)})`,
      [],
    );
    return 'created';
  }

  /**
   * Creates the UTC day's partition with the traces the default partition holds of that day moved
   * into it (a day whose partition was missing when they were written), in one transaction: the
   * new table is filled, then attached, which checks the default partition no longer holds any.
   * Returns how many moved.
   */
  async adoptDay(tx: SqlExecutor, dayMs: number): Promise<number> {
    const name = ident(dayPartitionName(dayMs));
    const range = `created_at >= ${midnightLiteral(dayMs)} AND created_at < ${midnightLiteral(dayMs + DAY_MS)}`;
    const columns = (await tx.query<{ list: string }>(COLUMNS, [])).rows[0].list;
    await tx.query(`CREATE TABLE ${name} (LIKE decision_traces INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`, []);
    const moved = await tx.query(
      `WITH moved AS (DELETE FROM ${DEFAULT_PARTITION} WHERE ${range} RETURNING ${columns}) INSERT INTO ${name} (${columns}) SELECT ${columns} FROM moved`,
      [],
    );
    await tx.query(`ALTER TABLE decision_traces ATTACH PARTITION ${name} FOR VALUES FROM (${midnightLiteral(dayMs)}) TO (${midnightLiteral(dayMs + DAY_MS)})`, []);
    return moved.rowCount;
  }

  /** Summarizes the page ranges of the partition's BRIN indexes that have no summary yet; how many it summarized. */
  async summarize(tx: SqlExecutor, name: string): Promise<number> {
    const { rows } = await tx.query<{ ranges: number }>(SUMMARIZE, [ident(name)]);
    return rows[0]?.ranges ?? 0;
  }

  /** Drops a partition whole: its rows go with it, no DELETE, nothing for vacuum. */
  async drop(tx: SqlExecutor, name: string): Promise<void> {
    await tx.query(`DROP TABLE IF EXISTS ${ident(name)}`, []);
  }

  /** Deletes up to `limit` traces of the default partition created before `before`; returns how many. */
  async deleteFromDefault(tx: SqlExecutor, before: Date, limit: number): Promise<number> {
    const { rowCount } = await tx.query(
      `DELETE FROM ${DEFAULT_PARTITION} WHERE ctid = ANY (ARRAY (SELECT ctid FROM ${DEFAULT_PARTITION} WHERE created_at < $1 LIMIT $2))`,
      [before.toISOString(), limit],
    );
    return rowCount;
  }

  private async exists(tx: SqlExecutor, name: string): Promise<boolean> {
    const { rows } = await tx.query<{ oid: string | null }>(`SELECT to_regclass($1)::text AS oid`, [name]);
    return rows[0].oid !== null;
  }
}
