import { errorMessage } from '../common/errors/error-message';
import type { ExportDestination } from './export-destination';
import { ExportPosition, formatPosition, frontier, isFrontier, START } from './export-position';
import { CREATED_INDEX, ID_INDEX, KindSchema } from './export-schema';
import { ExportSource, isStoreOutage } from './export-source';

/**
 * How a run ends (docs/operations.md "Decisions export"):
 * - `once`: one step from the beginning to the snapshot bound taken at the start, no cursor (`--since`/`--until` dumps);
 * - `catch-up`: from the durable cursor up to the snapshot bound taken at the start, then exit;
 * - `follow`: from the durable cursor, forever (the sidecar), until stopped.
 */
export type ExportMode = 'once' | 'catch-up' | 'follow';

export interface ExportJob {
  schema: KindSchema;
  destination: ExportDestination;
}

export interface ExportLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface ExporterOptions {
  mode: ExportMode;
  orgId?: string;
  since?: Date;
  until?: Date;
  /** Rows per read from the store (one cursor fetch or one keyset query). */
  batchRows?: number;
  /** How long `follow` waits when a pass found nothing new. */
  pollMs?: number;
  /** How long `once` and `catch-up` keep retrying a store that does not answer before failing (`follow` retries forever). */
  retryForMs?: number;
  /** Longest pause between two attempts while the store is down. */
  maxBackoffMs?: number;
  signal?: AbortSignal;
  log: ExportLog;
}

export interface ExportSummary {
  kinds: Array<{ kind: string; rows: number; position: string }>;
}

interface Run {
  job: ExportJob;
  pos: ExportPosition;
  rows: number;
}

export const DEFAULT_BATCH_ROWS = 5_000;

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Exports each job's kind step by step (export-position.ts says what a step is). A store that goes
 * away pauses the run: what is written so far is completed (files renamed, cursor moved), and the
 * step is read again from where it stood once the store answers, so nothing is skipped and, into a
 * directory, nothing is written twice.
 */
export class Exporter {
  private readonly batchRows: number;

  constructor(
    private readonly source: ExportSource,
    private readonly o: ExporterOptions,
  ) {
    this.batchRows = o.batchRows ?? DEFAULT_BATCH_ROWS;
  }

  async run(jobs: readonly ExportJob[]): Promise<ExportSummary> {
    const runs: Run[] = [];
    try {
      for (const job of jobs) {
        await this.guarded(runs, () => this.ensureReady(job.schema));
        // A one-off dump starts at the beginning whatever a cursor says.
        const durable = await job.destination.start();
        const saved = this.o.mode === 'once' ? null : durable;
        runs.push({ job, pos: saved ?? START, rows: 0 });
        if (saved) this.o.log.info({ kind: job.schema.kind, position: formatPosition(saved) }, 'export resumes from its cursor');
      }
      if (this.o.mode === 'follow') await this.follow(runs);
      else {
        const x0 = await this.guarded(runs, () => this.source.xmin());
        for (const r of runs) {
          while (!this.stopped && !(isFrontier(r.pos) && r.pos.hi >= x0)) {
            await this.guarded(runs, () => this.step(r, this.o.mode === 'once' ? x0 : undefined));
          }
        }
      }
    } finally {
      for (const r of runs) await r.job.destination.close();
    }
    return { kinds: runs.map((r) => ({ kind: r.job.schema.kind, rows: r.rows, position: formatPosition(r.pos) })) };
  }

  private get stopped(): boolean {
    return this.o.signal?.aborted === true;
  }

  private async follow(runs: Run[]): Promise<void> {
    while (!this.stopped) {
      let rows = 0;
      for (const r of runs) rows += await this.guarded(runs, () => this.step(r));
      if (rows === 0) await sleep(this.o.pollMs ?? 1_000, this.o.signal);
    }
  }

  private async ensureReady(schema: KindSchema): Promise<void> {
    if (await this.source.ready(schema)) return;
    throw new NotMigratedError(`the analytics store has no txid column on ${schema.table}: run this version's migrations (start the gateway, or gateway migrate) first`);
  }

  /** One step of one kind; the rows it exported. */
  private async step(r: Run, hiOverride?: bigint): Promise<number> {
    const { schema, destination } = r.job;
    let lo: bigint;
    let hi: bigint;
    let after: { atUs: bigint; id: bigint };
    if (isFrontier(r.pos)) {
      const x = hiOverride ?? (await this.source.xmin());
      if (x <= r.pos.hi) {
        await toDestination(() => destination.reached(r.pos));
        return 0;
      }
      lo = r.pos.hi;
      hi = x;
      after = { atUs: 0n, id: 0n };
    } else {
      ({ lo, hi } = r.pos);
      after = { atUs: r.pos.atUs, id: r.pos.id };
    }
    let rows = 0;
    const read = this.source.read({ schema, lo, hi, after, orgId: this.o.orgId, since: this.o.since, until: this.o.until }, this.batchRows);
    for await (const batch of read) {
      const last = batch[batch.length - 1];
      const to: ExportPosition = { lo, hi, atUs: BigInt(last[CREATED_INDEX] as string), id: BigInt(last[ID_INDEX] as string) };
      await toDestination(() => destination.write(batch, r.pos, to));
      r.pos = to;
      r.rows += batch.length;
      rows += batch.length;
      // Stopping mid-step is fine: the position says where the step stands.
      if (this.stopped) return rows;
    }
    r.pos = frontier(hi);
    await toDestination(() => destination.reached(r.pos));
    return rows;
  }

  /**
   * Runs `fn`, and while the store does not answer (or, following, fails in any way: a gateway not
   * yet migrated, a partition dropped under a read) completes what is written, waits and tries again.
   */
  private async guarded<T>(runs: readonly Run[], fn: () => Promise<T>): Promise<T> {
    let firstFailure = 0;
    let delay = 500;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        // The output failing (a disk full, a closed pipe) is not the store's: waiting will not mend it.
        if (err instanceof DestinationError) throw err.cause;
        const outage = isStoreOutage(err);
        if (!outage && this.o.mode !== 'follow') throw err;
        firstFailure ||= Date.now();
        if (this.o.mode !== 'follow' && Date.now() - firstFailure >= (this.o.retryForMs ?? 60_000)) throw err;
        if (this.stopped) throw err;
        for (const r of runs) await r.job.destination.flush();
        const fields = { err: errorMessage(err), retry_in_ms: delay };
        if (outage) this.o.log.warn(fields, 'analytics store unavailable: export paused');
        else this.o.log.error(fields, 'export failed: trying again');
        await sleep(delay, this.o.signal);
        delay = Math.min(delay * 2, this.o.maxBackoffMs ?? 30_000);
      }
    }
  }
}

/** A failure of the destination, kept apart from the store's (which are waited out). */
class DestinationError extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

async function toDestination(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    throw new DestinationError(err);
  }
}

/** The store lacks what the export reads by: its migrations have not run yet. */
export class NotMigratedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotMigratedError';
  }
}
