import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import type { Caller } from '../../common/http/request-context';
import { AppConfig } from '../../config/app-config';
import { ExportKind, ExportRow, KindSchema, SCHEMAS } from '../../export/export-schema';
import { ExportSource, KeysetExportSource, postgresExportSource } from '../../export/export-source';
import type { PgExportSource } from '../../export/pg-export-source';
import type { ExportFormat } from '../../export/formats/record-encoder';
import { StoreFallback } from '../../resilience/store-fallback';
import { SqlStore } from '../../stores/sql/sql-store';
import { AdminQuery } from '../common/admin-query';
import { fromAnalytics } from '../common/admin-store';
import { decodeCursor, encodeCursor } from '../common/cursor';

const KINDS = ['traces', 'events'] as const satisfies readonly ExportKind[];
const FORMATS = ['ndjson', 'csv'] as const satisfies readonly ExportFormat[];
/** Rows per read: one cursor fetch on Postgres, one keyset query on the embedded store. */
const BATCH_ROWS = 2_000;

/** An export whose bounds are known before its first byte: what the response's headers say. */
export interface PreparedExport {
  schema: KindSchema;
  format: ExportFormat;
  orgId: string;
  /** The rows with txid in [lo, hi) are streamed. */
  lo: bigint;
  hi: bigint;
  /** The cursor of `hi`: where the next export starts once this one is read to its end. */
  next: string;
}

/**
 * The decisions export over HTTP (docs/operations.md "Decisions export", over HTTP): the same rows
 * as `gateway export`, of the caller's organisation only. An export is one step: from the cursor
 * given (`since`; none: the beginning) to the snapshot bound taken when the request arrives, so its
 * end is known before the first row and the response header can carry the next cursor; the trailer
 * confirms it once the last row is sent. On Postgres the rows come through a server-side cursor on a
 * pool of its own (two connections: a long export never takes one the request path waits for); on
 * the embedded store through keyset batches between the gateway's own queries.
 */
@Injectable()
export class AdminExportService implements OnModuleDestroy {
  private pg: PgExportSource | null = null;

  constructor(
    private readonly store: SqlStore,
    private readonly config: AppConfig,
    private readonly fallback: StoreFallback,
  ) {}

  async prepare(caller: Caller, rawQuery: unknown): Promise<PreparedExport> {
    const q = AdminQuery.parse(rawQuery, ['kind', 'since', 'format']);
    const kind = q.oneOf('kind', KINDS) ?? 'traces';
    const format = q.oneOf('format', FORMATS) ?? 'ndjson';
    const scope = ['export', caller.orgId, kind];
    let since: readonly [string] | undefined;
    try {
      since = decodeCursor(q.string('since', { max: 2048 }), scope, ['int'] as const);
    } catch (err) {
      if (!(err instanceof GatewayError) || err.code !== 'invalid_request') throw err;
      throw new GatewayError('invalid_request', 'since is not a cursor of an export of this kind in this organisation.', { param: 'since' });
    }
    const lo = since ? BigInt(since[0]) : 0n;
    const x = await fromAnalytics(this.fallback, 'export', () => this.source().xmin());
    // A cursor ahead of the store (a database restored from an older backup) has nothing after it yet.
    const hi = x > lo ? x : lo;
    return { schema: SCHEMAS[kind], format, orgId: caller.orgId, lo, hi, next: encodeCursor(scope, [String(hi)]) };
  }

  /** The export's rows in (created_at, id) order, in batches. */
  async *rows(p: PreparedExport): AsyncGenerator<ExportRow[]> {
    if (p.hi <= p.lo) return;
    yield* this.source().read({ schema: p.schema, lo: p.lo, hi: p.hi, after: { atUs: 0n, id: 0n }, orgId: p.orgId }, BATCH_ROWS);
  }

  /** A stream that failed: counted and logged like any store failure; the 503 to answer if nothing was sent yet. */
  failed(err: unknown): GatewayError {
    this.fallback.failed('analytics', 'analytics-store:admin-export', err);
    return new GatewayError('internal', 'The analytics store is unavailable.', { status: 503, cause: err });
  }

  async onModuleDestroy(): Promise<void> {
    await this.pg?.close();
    this.pg = null;
  }

  private source(): ExportSource {
    const url = this.config.env.databaseUrl;
    if (this.store.kind === 'postgres' && url) return (this.pg ??= postgresExportSource(url, { max: 2, applicationName: 'routing-gateway-admin-export' }));
    return new KeysetExportSource(this.store);
  }
}
