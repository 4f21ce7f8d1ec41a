import { randomUUID } from 'node:crypto';
import { AddressInfo, createServer } from 'node:net';
import { FaultProxy } from '../../test/support/fault-proxy';
import { memoryLogger, SwitchableSql } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import { createTestDatabase, TestDatabase } from '../../test/support/postgres';
import { describeWithPostgres } from '../../test/support/real-servers';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { PgSqlStore } from '../stores/sql/pg-sql.store';
import type { SqlStore } from '../stores/sql/sql-store';
import type { FailedAttempt } from '../routing/dispatcher.service';
import { DecisionTrace, DecisionTraceSink } from './decision-trace';
import { DecisionTraceWriter, DecisionTraceWriterOptions } from './decision-trace.writer';
import { DecisionTracesRepository } from './decision-traces.repository';
import { newTraceId } from './trace-id';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A trace with every field set (factory with overrides). */
function makeTrace(over: Partial<DecisionTrace> = {}): DecisionTrace {
  return {
    id: newTraceId(),
    requestId: `req-${randomUUID()}`,
    orgId: 'acme',
    apiKeyId: 'acme-rw',
    sessionId: 'sess-1',
    endpoint: 'chat',
    requestedModel: 'auto',
    route: 'default',
    strategy: 'ordered',
    candidates: [
      { provider: 'openai', model: 'gpt-4o-mini', score: 0.72 },
      { provider: 'anthropic', model: 'claude-haiku', score: null },
    ],
    selectedProvider: 'anthropic',
    selectedModel: 'claude-haiku',
    fallbackUsed: true,
    attempts: 2,
    failedAttempts: [{ provider: 'openai', model: 'gpt-4o-mini', error: 'status', status: 503 }],
    experimentId: '7f1c2a4e-1b2c-4d3e-8f90-123456789abc',
    experimentArm: 'candidate',
    status: 200,
    errorCode: null,
    latencyMs: 123.5,
    ttftMs: 45.25,
    promptTokens: 12,
    completionTokens: 34,
    reasoningTokens: 5,
    costUsd: 0.000123,
    finishReason: 'stop',
    createdAt: new Date('2025-06-15T12:34:56.789Z'),
    ...over,
  };
}

async function metric(metrics: MetricsService, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values as Array<{ value: number; labels: Record<string, string> }> | undefined)?.find((v) =>
    Object.entries(labels).every(([k, val]) => v.labels[k] === val),
  )?.value;
}

async function eventually(check: () => Promise<boolean>, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(10);
  }
}

interface Row {
  request_id: string;
  [column: string]: unknown;
}

const SELECT = `SELECT request_id, org_id, api_key_id, session_id, endpoint, requested_model, route, strategy, candidates,
  selected_provider, selected_model, fallback_used, attempts, experiment_id, experiment_arm, status, error_code, latency_ms,
  ttft_ms, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd, finish_reason, created_at, failed_attempts FROM decision_traces ORDER BY id`;

function writerSuite(name: string, makeSql: () => Promise<{ store: SqlStore; cleanup(): Promise<void> }>): void {
  describe(`DecisionTraceWriter on ${name}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    async function rig(options: DecisionTraceWriterOptions = {}) {
      const { store, cleanup } = await makeSql();
      const sql = new SwitchableSql(store);
      const metrics = new MetricsService();
      const { logger, lines } = memoryLogger();
      const writer = new DecisionTraceWriter(new DecisionTracesRepository(sql), metrics, logger, new StoreFallback(metrics, logger), { flushIntervalMs: 60_000, ...options });
      cleanups.push(cleanup, () => writer.beforeApplicationShutdown());
      const rows = async () => (await store.query<Row>(SELECT)).rows;
      const count = async () => Number((await store.query<{ n: number }>('SELECT count(*)::int AS n FROM decision_traces')).rows[0].n);
      const inserts = () => sql.statements.filter((s) => /INSERT INTO decision_traces/.test(s)).length;
      return { writer, sql, store, metrics, lines, rows, count, inserts };
    }

    it('writes every column of a trace, and nothing else', async () => {
      const { writer, rows } = await rig();
      const t = makeTrace();
      writer.record(t);
      writer.record(makeTrace({ requestId: 'req-nulls', sessionId: null, route: null, strategy: null, candidates: null, selectedProvider: null, selectedModel: null, fallbackUsed: false, attempts: 0, failedAttempts: null, experimentId: null, experimentArm: null, status: 404, errorCode: 'model_not_found', ttftMs: null, promptTokens: null, completionTokens: null, reasoningTokens: null, costUsd: null, finishReason: null, endpoint: 'embeddings' }));
      await writer.flush();
      const [full, nulls] = await rows();
      expect(full).toEqual({
        request_id: t.requestId,
        org_id: 'acme',
        api_key_id: 'acme-rw',
        session_id: 'sess-1',
        endpoint: 'chat',
        requested_model: 'auto',
        route: 'default',
        strategy: 'ordered',
        candidates: [
          { provider: 'openai', model: 'gpt-4o-mini', score: 0.72 },
          { provider: 'anthropic', model: 'claude-haiku', score: null },
        ],
        selected_provider: 'anthropic',
        selected_model: 'claude-haiku',
        fallback_used: true,
        attempts: 2,
        failed_attempts: [{ provider: 'openai', model: 'gpt-4o-mini', error: 'status', status: 503 }],
        experiment_id: '7f1c2a4e-1b2c-4d3e-8f90-123456789abc',
        experiment_arm: 'candidate',
        status: 200,
        error_code: null,
        latency_ms: 123.5,
        ttft_ms: 45.25,
        prompt_tokens: 12,
        completion_tokens: 34,
        reasoning_tokens: 5,
        cost_usd: 0.000123,
        finish_reason: 'stop',
        created_at: new Date('2025-06-15T12:34:56.789Z'),
      });
      expect(nulls).toMatchObject({
        request_id: 'req-nulls',
        endpoint: 'embeddings',
        session_id: null,
        candidates: null,
        selected_provider: null,
        fallback_used: false,
        attempts: 0,
        failed_attempts: null,
        experiment_id: null,
        status: 404,
        error_code: 'model_not_found',
        ttft_ms: null,
        prompt_tokens: null,
        cost_usd: null,
      });
    });

    it('writes in batches of batchSize, one INSERT per batch, in order', async () => {
      const { writer, inserts, rows, metrics } = await rig({ batchSize: 500 });
      const traces = Array.from({ length: 1_201 }, (_, i) => makeTrace({ requestId: `r${i}` }));
      for (const t of traces) writer.record(t);
      await writer.flush();
      await writer.flush();
      expect(inserts()).toBe(3);
      expect((await rows()).map((r) => r.request_id)).toEqual(traces.map((t) => t.requestId));
      expect(await metric(metrics, 'gateway_traces_written_total')).toBe(1_201);
      expect(await metric(metrics, 'gateway_trace_buffer_depth')).toBe(0);
    });

    it('writes on its own: every interval, and at once when a batch is waiting', async () => {
      const timed = await rig({ flushIntervalMs: 20 });
      timed.writer.record(makeTrace());
      await eventually(async () => (await timed.count()) === 1);

      const batched = await rig({ flushIntervalMs: 60_000, batchSize: 10 });
      for (let i = 0; i < 9; i++) batched.writer.record(makeTrace());
      await sleep(50);
      expect(await batched.count()).toBe(0);
      batched.writer.record(makeTrace());
      await eventually(async () => (await batched.count()) === 10);
    });

    it('under load writes whole batches only: what arrives during a write waits for the next full batch or the interval', async () => {
      const { writer, sql, count, inserts } = await rig({ flushIntervalMs: 60_000, batchSize: 10 });
      sql.delayMs = 100;
      for (let i = 0; i < 10; i++) writer.record(makeTrace());
      await sleep(20);
      // During the first batch's write: one more whole batch and a remainder of 3.
      for (let i = 0; i < 13; i++) writer.record(makeTrace());
      await eventually(async () => (await count()) === 20);
      await sleep(300);
      expect(await count()).toBe(20);
      expect(inserts()).toBe(2);
      expect(writer.depth).toBe(3);
      // The interval (here flush) writes the remainder.
      await writer.flush();
      expect(await count()).toBe(23);
      expect(inserts()).toBe(3);
    });

    /** Records 3 traces, starts `write` (slowed by the store's delay) and records 4 more while it runs. */
    async function threeThenFourDuring(writer: DecisionTraceWriter, write: () => Promise<void>): Promise<void> {
      for (let i = 0; i < 3; i++) writer.record(makeTrace());
      const written = write();
      await sleep(20);
      for (let i = 0; i < 4; i++) writer.record(makeTrace());
      await written;
    }

    it('a flush (as the interval) writes what waited when it began; what arrives during its write waits for a whole batch', async () => {
      const { writer, sql, count, inserts } = await rig({ flushIntervalMs: 60_000, batchSize: 10 });
      sql.delayMs = 100;
      await threeThenFourDuring(writer, () => writer.flush());
      await sleep(150);
      expect(await count()).toBe(3);
      expect(inserts()).toBe(1);
      expect(writer.depth).toBe(4);
      // Arrivals that fill a batch are written at once, and the shutdown writes the rest.
      for (let i = 0; i < 8; i++) writer.record(makeTrace());
      await eventually(async () => (await count()) === 13);
      expect(writer.depth).toBe(2);
      await writer.beforeApplicationShutdown();
      expect(await count()).toBe(15);
    });

    it('the shutdown also writes the traces recorded while it writes', async () => {
      const { writer, sql, count } = await rig({ flushIntervalMs: 60_000, batchSize: 10 });
      sql.delayMs = 50;
      await threeThenFourDuring(writer, () => writer.beforeApplicationShutdown());
      expect(await count()).toBe(7);
    });

    it('stores values the table would refuse as NULL instead of losing the batch', async () => {
      const { writer, rows } = await rig();
      // A failed attempt carrying more than its four fields (an upstream message) stores only those four.
      const leaky = { provider: 'openai', model: 'gpt-4o-mini', error: 'network', status: Number.NaN, detail: 'upstream said: secret' } as unknown as FailedAttempt;
      writer.record(makeTrace({ requestId: 'odd', experimentId: 'not-a-uuid', latencyMs: Number.NaN, attempts: 1.6, costUsd: Number.POSITIVE_INFINITY, sessionId: 'a\u0000b', createdAt: new Date('nope'), failedAttempts: [leaky] }));
      writer.record(makeTrace({ requestId: 'fine', failedAttempts: [] }));
      await writer.flush();
      const [odd, fine] = await rows();
      expect(odd).toMatchObject({ request_id: 'odd', experiment_id: null, latency_ms: 0, attempts: 2, cost_usd: null, session_id: 'ab' });
      expect(odd.failed_attempts).toEqual([{ provider: 'openai', model: 'gpt-4o-mini', error: 'network', status: null }]);
      expect(fine.failed_attempts).toBeNull();
      expect(odd.created_at).toBeInstanceOf(Date);
      expect(fine.request_id).toBe('fine');
    });

    it('stores a lone UTF-16 surrogate (a model name from a broken client) as U+FFFD, in text and in JSON columns alike', async () => {
      const { writer, rows } = await rig();
      writer.record(makeTrace({ requestId: 'lone', requestedModel: 'gpt\ud800x', candidates: [{ provider: 'openai', model: 'm\udc00', score: 1 }] }));
      writer.record(makeTrace({ requestId: 'pair', requestedModel: 'emoji \ud83d\ude00' }));
      await writer.flush();
      const [lone, pair] = await rows();
      expect(lone).toMatchObject({ request_id: 'lone', requested_model: 'gpt\ufffdx', candidates: [{ provider: 'openai', model: 'm\ufffd', score: 1 }] });
      expect(pair).toMatchObject({ request_id: 'pair', requested_model: 'emoji \ud83d\ude00' });
    });

    it('keeps what fits while the store is down, counts and reports the drops, and writes the kept traces after recovery', async () => {
      const { writer, sql, rows, metrics, lines } = await rig({ maxBuffered: 100, batchSize: 20, flushIntervalMs: 60_000 });
      sql.down = true;
      const traces = Array.from({ length: 250 }, (_, i) => makeTrace({ requestId: `r${i}` }));
      // record() is synchronous: it hands nothing back to wait on, so a dead store cannot hold a request.
      for (const t of traces) expect(writer.record(t)).toBeUndefined();
      await writer.flush();
      expect(writer.depth).toBeLessThanOrEqual(100);
      expect(writer.depth).toBe(100);
      expect(await metric(metrics, 'gateway_traces_dropped_total', { reason: 'buffer_full' })).toBe(150);
      const dropLines = lines.filter((l) => l.topic === 'decision-traces');
      expect(dropLines.length).toBe(1);
      expect(dropLines[0]).toMatchObject({ msg: 'decision traces dropped', dropped: 1, dropped_total: 1 });
      expect(lines.filter((l) => l.topic === 'analytics-store:decision-traces')).toHaveLength(1);
      expect(await metric(metrics, 'gateway_trace_buffer_depth')).toBe(100);

      sql.down = false;
      await writer.flush();
      // The oldest were dropped: the newest 100 are written, in order.
      expect((await rows()).map((r) => r.request_id)).toEqual(traces.slice(150).map((t) => t.requestId));
      expect(await metric(metrics, 'gateway_traces_written_total')).toBe(100);
      // Nothing dropped is unaccounted for: at shutdown the remaining count is logged.
      await writer.beforeApplicationShutdown();
      const last = lines.filter((l) => l.topic === 'decision-traces').pop();
      expect(last).toMatchObject({ dropped: 149, dropped_total: 150, buffered: 0 });
    });

    it('backs off between failed writes and retries on its timer', async () => {
      const { writer, sql, count } = await rig({ flushIntervalMs: 20, maxBackoffMs: 40 });
      sql.down = true;
      for (let i = 0; i < 5; i++) writer.record(makeTrace());
      await sleep(150);
      expect(writer.depth).toBe(5);
      sql.down = false;
      await eventually(async () => (await count()) === 5);
      expect(writer.depth).toBe(0);
    });

    it('writes what it holds at shutdown; what it cannot write is counted and logged', async () => {
      const ok = await rig();
      for (let i = 0; i < 30; i++) ok.writer.record(makeTrace());
      await ok.writer.beforeApplicationShutdown();
      expect(await ok.count()).toBe(30);

      const down = await rig({ shutdownTimeoutMs: 500 });
      down.sql.down = true;
      for (let i = 0; i < 7; i++) down.writer.record(makeTrace());
      await down.writer.beforeApplicationShutdown();
      expect(await metric(down.metrics, 'gateway_traces_dropped_total', { reason: 'shutdown' })).toBe(7);
      expect(down.lines.filter((l) => l.topic === 'decision-traces').pop()).toMatchObject({ dropped: 7, dropped_total: 7 });
      // Later records (none are expected after shutdown) are counted too, not queued forever.
      down.writer.record(makeTrace());
      expect(await metric(down.metrics, 'gateway_traces_dropped_total', { reason: 'shutdown' })).toBe(8);
    });
  });
}

writerSuite('PGlite', async () => {
  const store = await createTestPglite();
  return { store, cleanup: () => store.close() };
});

describeWithPostgres('on a real Postgres', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db?.drop());

  writerSuite('Postgres', async () => {
    const store = new PgSqlStore(db.url);
    await store.query('DELETE FROM decision_traces');
    return { store, cleanup: () => store.close() };
  });

  it('survives a real connection outage: record never blocks, and the kept traces are written once Postgres is reachable again', async () => {
    const admin = new PgSqlStore(db.url);
    await admin.query('DELETE FROM decision_traces');
    const proxy = await FaultProxy.start(db.url);
    const store = new PgSqlStore(proxy.urlFor(db.url), { connectionTimeoutMs: 300, statementTimeoutMs: 1_000 });
    const metrics = new MetricsService();
    const logger = memoryLogger().logger;
    const writer = new DecisionTraceWriter(new DecisionTracesRepository(store), metrics, logger, new StoreFallback(metrics, logger), { maxBuffered: 50, batchSize: 10, flushIntervalMs: 60_000 });
    try {
      writer.record(makeTrace({ requestId: 'before' }));
      await writer.flush();
      proxy.set('down');
      for (let i = 0; i < 80; i++) writer.record(makeTrace({ requestId: `during-${i}` }));
      await writer.flush();
      expect(writer.depth).toBe(50);
      expect(await metric(metrics, 'gateway_traces_dropped_total', { reason: 'buffer_full' })).toBe(30);
      expect(await metric(metrics, 'gateway_store_errors_total', { store: 'analytics' })).toBeGreaterThanOrEqual(1);
      proxy.set('pass');
      await writer.flush();
      const { rows } = await admin.query<{ request_id: string }>('SELECT request_id FROM decision_traces ORDER BY id');
      expect(rows.map((r) => r.request_id)).toEqual(['before', ...Array.from({ length: 50 }, (_, i) => `during-${i + 30}`)]);
    } finally {
      await writer.beforeApplicationShutdown();
      await store.close();
      await proxy.close();
      await admin.close();
    }
  });
});

describe('DecisionTraceWriter with a sink that refuses some traces', () => {
  /** Refuses (as Postgres would, SQLSTATE 22P02) any batch holding a trace whose request id starts with "bad". */
  class PickySink extends DecisionTraceSink {
    readonly stored: string[] = [];
    calls = 0;
    async write(traces: readonly DecisionTrace[]): Promise<void> {
      this.calls++;
      if (traces.some((t) => t.requestId.startsWith('bad'))) throw Object.assign(new Error('invalid input syntax'), { code: '22P02' });
      this.stored.push(...traces.map((t) => t.requestId));
    }
  }

  it('isolates and drops only the refused traces, counted as rejected', async () => {
    const sink = new PickySink();
    const metrics = new MetricsService();
    const logger = memoryLogger().logger;
    const writer = new DecisionTraceWriter(sink, metrics, logger, new StoreFallback(metrics, logger), { batchSize: 16, flushIntervalMs: 60_000 });
    const ids = Array.from({ length: 16 }, (_, i) => (i === 3 || i === 11 ? `bad-${i}` : `ok-${i}`));
    for (const id of ids) writer.record(makeTrace({ requestId: id }));
    await writer.flush();
    expect([...sink.stored].sort()).toEqual(ids.filter((id) => id.startsWith('ok')).sort());
    expect(await metric(metrics, 'gateway_traces_dropped_total', { reason: 'rejected' })).toBe(2);
    expect(writer.depth).toBe(0);
    await writer.beforeApplicationShutdown();
  });
});

describe('DecisionTraceWriter against a dead Postgres port', () => {
  it('record returns at once and never throws; the buffer stays bounded', async () => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const { port } = srv.address() as AddressInfo;
    await new Promise((r) => srv.close(r));
    const store = new PgSqlStore(`postgres://postgres@127.0.0.1:${port}/none`, { connectionTimeoutMs: 200 });
    const metrics = new MetricsService();
    const logger = memoryLogger().logger;
    const writer = new DecisionTraceWriter(new DecisionTracesRepository(store), metrics, logger, new StoreFallback(metrics, logger), { maxBuffered: 1_000, batchSize: 100, flushIntervalMs: 10 });
    try {
      const started = process.hrtime.bigint();
      for (let i = 0; i < 20_000; i++) writer.record(makeTrace());
      expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(1_000);
      await sleep(100);
      expect(writer.depth).toBeLessThanOrEqual(1_000);
      for (let i = 0; i < 100; i++) writer.record(makeTrace());
      expect(writer.depth).toBe(1_000);
      expect(await metric(metrics, 'gateway_traces_dropped_total', { reason: 'buffer_full' })).toBe(19_100);
    } finally {
      await writer.beforeApplicationShutdown();
      await store.close();
    }
  });
});
