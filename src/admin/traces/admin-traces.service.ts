import { Injectable } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import type { Caller } from '../../common/http/request-context';
import { StoreFallback } from '../../resilience/store-fallback';
import { AdminQuery } from '../common/admin-query';
import { fromAnalytics, type Page } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import { TraceDetailJson, TraceSummaryJson, toTraceDetailJson, toTraceSummaryJson } from './admin-traces.mapper';
import { AdminTracesRepository } from './admin-traces.repository';

/** Byte-identical for another organisation's trace, a missing key and a malformed one. */
const NOT_FOUND_MESSAGE = 'No trace with this id in the organisation.';
const DEFAULT_SPAN_MS = 86_400_000;
/** The request-id and session-id rule (docs/api.md "Request id and session id"). */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const NAME = /^[A-Za-z0-9._:\/-]{1,256}$/;
const CODE = /^[A-Za-z0-9_]{1,64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STATUS = /^(?:[1-5][0-9]{2}|[1-5]xx)$/;
const ARMS = ['baseline', 'candidate', 'baseline_fallback', 'candidate_fallback'] as const;
const TRACE_KEY = /^(\d{1,19})-(\d{1,19})$/;
const INT8_MAX = 2n ** 63n - 1n;

/**
 * Decision traces for operators (docs/api.md "Admin API", traces): search the organisation's traces
 * in a time range by request, session, model, provider, status, error code, experiment and arm;
 * read one with its candidates and scores, filtered targets and reasons, and failed attempts. A
 * trace holds ids and numbers only: there is no prompt or completion text to leak.
 */
@Injectable()
export class AdminTracesService {
  constructor(
    private readonly traces: AdminTracesRepository,
    private readonly fallback: StoreFallback,
  ) {}

  async search(caller: Caller, rawQuery: unknown): Promise<Page<TraceSummaryJson>> {
    const q = AdminQuery.parse(rawQuery, [
      'from', 'to', 'request_id', 'session_id', 'model', 'provider', 'status', 'error_code', 'experiment_id', 'arm', 'limit', 'cursor',
    ]);
    const { from, to, asGiven } = q.range(new Date(), DEFAULT_SPAN_MS);
    const requestId = q.string('request_id', { pattern: REQUEST_ID, what: '1 to 128 characters of A-Z a-z 0-9 . _ : -' }) ?? null;
    const sessionId = q.string('session_id', { pattern: REQUEST_ID, what: '1 to 128 characters of A-Z a-z 0-9 . _ : -' }) ?? null;
    const model = q.string('model', { pattern: NAME, what: 'a catalogue model id' }) ?? null;
    const provider = q.string('provider', { pattern: NAME, what: 'a provider id' }) ?? null;
    const status = q.string('status', { pattern: STATUS, what: 'an HTTP status (e.g. 502) or a class (2xx, 4xx, 5xx)' }) ?? null;
    const errorCode = q.string('error_code', { pattern: CODE, what: 'an error code' }) ?? null;
    const experimentId = q.string('experiment_id', { pattern: UUID, what: 'an experiment id (a UUID)' })?.toLowerCase() ?? null;
    const arm = q.oneOf('arm', ARMS) ?? null;
    const { limit, cursor } = q.page();
    const filters = { requestId, sessionId, model, provider, status, errorCode, experimentId, arm };
    const scope = ['traces', caller.orgId, asGiven, filters];
    const after = decodeCursor(cursor, scope, ['int', 'int'] as const);
    const rows = await fromAnalytics(this.fallback, 'traces', () =>
      this.traces.search({
        orgId: caller.orgId,
        from,
        to,
        requestId,
        sessionId,
        model,
        provider,
        status: status !== null && !status.endsWith('xx') ? Number(status) : null,
        statusClass: status !== null && status.endsWith('xx') ? Number(status[0]) * 100 : null,
        errorCode,
        experimentId,
        arm,
        after: after ? { atUs: after[0], id: after[1] } : null,
        limit: limit + 1,
      }),
    );
    return pageOf(rows, limit, scope, (r) => [r.atUs, r.id], toTraceSummaryJson);
  }

  async get(caller: Caller, key: string, rawQuery: unknown): Promise<TraceDetailJson> {
    AdminQuery.parse(rawQuery, []);
    const m = TRACE_KEY.exec(key);
    const valid = m !== null && BigInt(m[1]) <= INT8_MAX && BigInt(m[2]) <= INT8_MAX;
    const row = valid ? await fromAnalytics(this.fallback, 'traces', () => this.traces.find(caller.orgId, m![1], m![2])) : null;
    if (!row) throw new GatewayError('not_found', NOT_FOUND_MESSAGE);
    return toTraceDetailJson(row);
  }
}
