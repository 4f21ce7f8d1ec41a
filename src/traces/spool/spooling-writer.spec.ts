import { mkdtempSync, readdirSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestPglite } from '../../../test/support/pglite';
import { memoryLogger, SwitchableSql } from '../../../test/support/kit';
import { MetricsService } from '../../metrics/metrics.service';
import { StoreFallback } from '../../resilience/store-fallback';
import type { PgliteSqlStore } from '../../stores/sql/pglite-sql.store';
import type { DecisionTrace } from '../decision-trace';
import { DecisionTraceWriter, DecisionTraceWriterOptions } from '../decision-trace.writer';
import { DecisionTracesRepository } from '../decision-traces.repository';
import { TraceSpoolConfig } from './trace-spool.config';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let n = 0;
const ID_BASE = Math.floor(Math.random() * 2 ** 40) + 1;
/** Each test's traces carry its own prefix, and only those are counted: a test never sees another's rows. */
let prefix = 'spool';
function trace(over: Partial<DecisionTrace> = {}): DecisionTrace {
  n++;
  // Cast: the literal is a whole trace (with the key the store writes idempotently by), whichever fields the type lists today.
  return {
    id: ID_BASE + n,
    requestId: `${prefix}-${n}`,
    orgId: 'acme',
    apiKeyId: 'acme-rw',
    sessionId: `s-${n >> 2}`,
    endpoint: 'chat',
    requestedModel: 'auto',
    route: 'default',
    strategy: 'ordered',
    candidates: [{ provider: 'mock', model: 'mock-fast', score: null }],
    selectedProvider: 'mock',
    selectedModel: 'mock-fast',
    fallbackUsed: false,
    attempts: 1,
    failedAttempts: null,
    experimentId: null,
    experimentArm: null,
    status: 200,
    errorCode: null,
    latencyMs: 3,
    ttftMs: null,
    promptTokens: 5,
    completionTokens: 7,
    reasoningTokens: null,
    costUsd: null,
    finishReason: 'stop',
    createdAt: new Date(),
    ...over,
  } as DecisionTrace;
}

/** Records the traces as requests would, spread over time (5 per millisecond), never all in one event-loop turn. */
async function recordAll(writer: DecisionTraceWriter, traces: DecisionTrace[]): Promise<void> {
  for (let i = 0; i < traces.length; i++) {
    writer.record(traces[i]);
    if (i % 5 === 4) await sleep(1);
  }
}

async function metric(metrics: MetricsService, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = (m?.values as Array<{ value: number; labels: Record<string, string> }> | undefined)?.find((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want));
  return v?.value ?? 0;
}

describe('DecisionTraceWriter with the trace spool (PGlite)', () => {
  let db: PgliteSqlStore;
  let root: string;
  const writers: DecisionTraceWriter[] = [];

  beforeAll(async () => {
    db = await createTestPglite();
  });
  afterAll(() => db.close());
  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'gw-spool-writer-'));
    prefix = `t${Date.now().toString(36)}${n}`;
  });
  afterEach(async () => {
    for (const w of writers.splice(0)) await w.beforeApplicationShutdown();
    rmSync(root, { recursive: true, force: true });
  });

  function rig(o: { options?: DecisionTraceWriterOptions; spool?: Partial<TraceSpoolConfig> } = {}) {
    const sql = new SwitchableSql(db);
    const metrics = new MetricsService();
    const { logger, lines } = memoryLogger();
    const spool: TraceSpoolConfig = { dir: join(root, 'trace-spool'), maxBytes: 64 << 20, replayPerSecond: 1_000_000, ...o.spool };
    const writer = new DecisionTraceWriter(new DecisionTracesRepository(sql), metrics, logger, new StoreFallback(metrics, logger), { flushIntervalMs: 60_000, maxBuffered: 200, batchSize: 20, ...o.options }, spool);
    writers.push(writer);
    const mine = `${prefix}-%`;
    const rows = async () => (await db.query<{ request_id: string; n: number }>('SELECT request_id, count(*)::int AS n FROM decision_traces WHERE request_id LIKE $1 GROUP BY 1', [mine])).rows;
    const stop = async () => {
      await writer.beforeApplicationShutdown();
      writers.splice(writers.indexOf(writer), 1);
    };
    return { writer, sql, metrics, lines, rows, stop };
  }

  /** Exactly one row per trace sent, and no other. */
  async function expectExactly(rows: () => Promise<Array<{ request_id: string; n: number }>>, sent: DecisionTrace[]): Promise<void> {
    const got = await rows();
    expect(got.filter((r) => r.n > 1)).toEqual([]);
    expect(got.map((r) => r.request_id).sort()).toEqual(sent.map((t) => t.requestId).sort());
  }

  it('an outage with ten times the buffer in traces: none dropped, all on disk, then exactly one row each after recovery', async () => {
    const { writer, sql, metrics, rows } = rig();
    expect(await writer.spoolReady()).toBe(true);
    sql.down = true;
    const sent = Array.from({ length: 2_000 }, () => trace());
    await recordAll(writer, sent);
    await writer.flush();
    expect(await metric(metrics, 'gateway_traces_dropped_total', { reason: 'buffer_full' })).toBe(0);
    expect(writer.depth).toBe(0);
    expect(await metric(metrics, 'gateway_traces_spooled_total')).toBe(2_000);
    expect(await metric(metrics, 'gateway_trace_spool_bytes')).toBeGreaterThan(100_000);

    sql.down = false;
    await writer.replay();
    await expectExactly(rows, sent);
    expect(await metric(metrics, 'gateway_traces_replayed_total')).toBe(2_000);
    expect(await metric(metrics, 'gateway_trace_spool_bytes')).toBe(0);
    expect(readdirSync(join(root, 'trace-spool')).filter((f) => f.endsWith('.seg'))).toEqual([]);
  });

  it('while the store breaker says the store is out, batches go to the spool without a call to the store; replay waits for it', async () => {
    const store = { available: false };
    const { writer, sql, rows } = rig({ spool: { store } });
    await writer.spoolReady();
    const sent = Array.from({ length: 150 }, () => trace());
    await recordAll(writer, sent);
    await writer.flush();
    await writer.replay();
    expect(sql.queries).toBe(0);
    expect(writer.spooledBytes).toBeGreaterThan(0);
    store.available = true;
    await writer.replay();
    await expectExactly(rows, sent);
  });

  it('traces recorded after the store is back are written while the backlog replays, never held behind it', async () => {
    const { writer, sql, rows } = rig({ spool: { replayPerSecond: 200 } });
    await writer.spoolReady();
    sql.down = true;
    const backlog = Array.from({ length: 400 }, () => trace());
    await recordAll(writer, backlog);
    await writer.flush();
    sql.down = false;
    const started = Date.now();
    const replay = writer.replay();
    const live = Array.from({ length: 40 }, () => trace());
    await recordAll(writer, live);
    await writer.flush();
    const present = new Set((await rows()).map((r) => r.request_id));
    expect(live.filter((t) => !present.has(t.requestId))).toEqual([]);
    expect(backlog.filter((t) => !present.has(t.requestId)).length).toBeGreaterThan(0);
    await replay;
    // Paced: 400 traces at 200/s cannot take less than the 380 after the first batch of 20 allow.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_800);
    await expectExactly(rows, [...backlog, ...live]);
  });

  it('a slow store: the oldest waiting batches go to disk instead of being dropped', async () => {
    const { writer, sql, metrics, rows } = rig();
    await writer.spoolReady();
    sql.delayMs = 300;
    const sent = Array.from({ length: 600 }, () => trace());
    await recordAll(writer, sent);
    expect(await metric(metrics, 'gateway_traces_dropped_total', { reason: 'buffer_full' })).toBe(0);
    expect(await metric(metrics, 'gateway_traces_spooled_total')).toBeGreaterThan(0);
    sql.delayMs = 0;
    await writer.flush();
    await writer.replay();
    await expectExactly(rows, sent);
  });

  it('the cap reached: what the spool cannot take stays in the buffer, beyond which drops are counted and logged as without a spool', async () => {
    const { writer, sql, metrics, lines, rows } = rig({ spool: { maxBytes: 40_000 } });
    await writer.spoolReady();
    sql.down = true;
    const sent = Array.from({ length: 1_000 }, () => trace());
    await recordAll(writer, sent);
    await writer.flush();
    const spooled = await metric(metrics, 'gateway_traces_spooled_total');
    const dropped = await metric(metrics, 'gateway_traces_dropped_total', { reason: 'buffer_full' });
    expect(spooled).toBeGreaterThan(0);
    expect(writer.spooledBytes).toBeLessThanOrEqual(40_000);
    expect(dropped).toBe(1_000 - spooled - writer.depth);
    expect(dropped).toBeGreaterThan(0);
    expect(lines.find((l) => l.topic === 'decision-traces')).toMatchObject({ msg: 'decision traces dropped' });
    sql.down = false;
    await writer.flush();
    await writer.replay();
    const got = await rows();
    expect(got.length).toBe(1_000 - dropped);
    expect(got.filter((r) => r.n > 1)).toEqual([]);
  });

  it('shutdown during an outage leaves the traces on disk; the next writer on the data dir replays them', async () => {
    const first = rig();
    await first.writer.spoolReady();
    first.sql.down = true;
    const sent = Array.from({ length: 250 }, () => trace());
    await recordAll(first.writer, sent);
    await first.stop();
    expect(await metric(first.metrics, 'gateway_traces_dropped_total', { reason: 'shutdown' })).toBe(0);
    expect(await metric(first.metrics, 'gateway_traces_spooled_total')).toBe(250);

    const second = rig();
    await second.writer.spoolReady();
    expect(second.writer.spooledBytes).toBeGreaterThan(0);
    await second.writer.replay();
    await expectExactly(second.rows, sent);
    expect(second.lines.find((l) => l.topic === 'decision-traces:spool')).toMatchObject({ msg: 'trace spool holds traces from an earlier run: replaying them once the analytics store answers' });
  });

  it('a crash mid-write (the journal\'s last record cut short): the rest replays, the torn record is counted', async () => {
    const first = rig();
    await first.writer.spoolReady();
    first.sql.down = true;
    const sent = Array.from({ length: 120 }, () => trace());
    await recordAll(first.writer, sent);
    await first.stop();
    const dir = join(root, 'trace-spool');
    const last = readdirSync(dir).filter((f) => f.endsWith('.seg')).sort().pop()!;
    truncateSync(join(dir, last), statSync(join(dir, last)).size - 10);

    const second = rig();
    await second.writer.spoolReady();
    await second.writer.replay();
    await expectExactly(second.rows, sent.slice(0, -1));
    expect(await metric(second.metrics, 'gateway_traces_dropped_total', { reason: 'spool_damaged' })).toBe(1);
  });

  it('a spool another writer holds: this one keeps traces in memory only, says so, and takes the spool once it is free', async () => {
    const first = rig();
    await first.writer.spoolReady();
    const second = rig({ spool: { openRetryMs: 10 }, options: { flushIntervalMs: 20 } });
    expect(await second.writer.spoolReady()).toBe(false);
    expect(second.lines.find((l) => l.topic === 'decision-traces:spool')).toMatchObject({ reason: expect.stringContaining('is already open in this process') });
    await first.stop();
    const deadline = Date.now() + 5_000;
    while (!(await second.writer.spoolReady()) && Date.now() < deadline) await sleep(20);
    expect(await second.writer.spoolReady()).toBe(true);
  });
});
