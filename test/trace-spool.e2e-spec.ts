import { mkdtempSync, readdirSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { MetricsService } from '../src/metrics/metrics.service';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriterOptions } from '../src/traces/decision-trace.writer';
import { startTestApp, TestApp, PRO_KEY, TEST_GATEWAY_YAML } from './support/app';
import { FaultProxy } from './support/fault-proxy';
import { createTestPglite } from './support/pglite';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { describeWithPostgres } from './support/real-servers';
import { SwitchableSql } from './support/switchable-sql';

/**
 * The durable trace spool (docs/operations.md "Store outages") through the whole gateway: chat
 * requests answered while the analytics store is out leave their decision traces in
 * `<GATEWAY_DATA_DIR>/trace-spool`, and once the store answers again every one of them is stored
 * exactly once (counted by request id: sent vs rows). On the embedded store, cut by a switch in front
 * of it; on a real Postgres, cut by a TCP proxy (the store breaker then says it is out). The writer's
 * buffer is made small so that each outage holds many times what memory alone would keep.
 */

jest.setTimeout(120_000);

const SMALL_BUFFER: DecisionTraceWriterOptions = { maxBuffered: 100, batchSize: 10, flushIntervalMs: 50, maxBackoffMs: 200 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The embedded store behind a switch, kept open across the gateways that share it (each one's shutdown closes its SqlStore). */
class SharedSwitchableSql extends SwitchableSql {
  override close(): Promise<void> {
    return Promise.resolve();
  }
}

async function metric(t: TestApp, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = await t.app.get(MetricsService).registry.getSingleMetric(name)?.get();
  return (m?.values ?? []).filter((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want)).reduce((n, x) => n + x.value, 0);
}

async function until(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** `n` chat requests, a few at a time, each with its own request id; all must answer 200. */
async function chats(t: TestApp, run: string, from: number, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${run}-${from + i}`);
  for (let i = 0; i < ids.length; i += 8) {
    const statuses = await Promise.all(
      ids.slice(i, i + 8).map(async (id) => {
        const r = await fetch(`${t.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', 'x-request-id': id },
          body: JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'hello' }] }),
        });
        await r.arrayBuffer();
        return r.status;
      }),
    );
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  }
  return ids;
}

/** Lost (sent, no row) and duplicated (more than one row) request ids. */
async function account(count: (prefix: string) => Promise<Array<{ request_id: string; n: number }>>, run: string, sent: string[]) {
  const rows = new Map((await count(`${run}-%`)).map((r) => [r.request_id, Number(r.n)]));
  return { lost: sent.filter((id) => !rows.has(id)), duplicated: [...rows].filter(([, n]) => n > 1).map(([id]) => id), unknown: [...rows.keys()].filter((id) => !sent.includes(id)) };
}

const drained = (t: TestApp) => async () => (await metric(t, 'gateway_trace_spool_bytes')) === 0 && (await metric(t, 'gateway_trace_buffer_depth')) === 0;

describe('trace spool on the embedded store (switched off in front of it)', () => {
  let sql: SharedSwitchableSql;
  let inner: SqlStore;
  const apps: TestApp[] = [];
  const dirs: string[] = [];
  const count = async (like: string) =>
    (await inner.query<{ request_id: string; n: number }>('SELECT request_id, count(*)::int AS n FROM decision_traces WHERE request_id LIKE $1 GROUP BY 1', [like])).rows;

  beforeAll(async () => {
    inner = await createTestPglite();
    sql = new SharedSwitchableSql(inner);
  });
  afterEach(async () => {
    sql.down = false;
    for (const a of apps.splice(0)) await a.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  afterAll(() => inner.close());

  async function gateway(dataDir: string, yaml = TEST_GATEWAY_YAML): Promise<TestApp> {
    const t = await startTestApp({ yaml, env: { GATEWAY_DATA_DIR: dataDir }, overrides: [{ provide: SqlStore, useValue: sql }, { provide: DecisionTraceWriterOptions, useValue: SMALL_BUFFER }] });
    apps.push(t);
    return t;
  }
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'gw-spool-e2e-'));
    dirs.push(d);
    return d;
  };

  it('an outage with 1,000 chat requests (ten times the buffer): after recovery exactly one row each, none lost, none duplicated', async () => {
    const t = await gateway(dataDir());
    const run = `pgl-outage-${Date.now().toString(36)}`;
    // The key is known before the outage (a key never seen answers 503 while the store is out).
    const before = await chats(t, run, 0, 1);
    sql.down = true;
    const sent = [...before, ...(await chats(t, run, 1, 1_000))];
    await until('every trace on disk', async () => (await metric(t, 'gateway_traces_spooled_total')) >= 1_000, 10_000).catch(async (e) => {
      throw new Error(`${e.message}: ${JSON.stringify({ spooled: await metric(t, 'gateway_traces_spooled_total'), depth: await metric(t, 'gateway_trace_buffer_depth'), dropped: await metric(t, 'gateway_traces_dropped_total'), written: await metric(t, 'gateway_traces_written_total'), logs: t.logs.filter((l) => l.includes('trace')).slice(-5) })}`);
    });
    expect(await metric(t, 'gateway_traces_dropped_total')).toBe(0);
    expect(await metric(t, 'gateway_trace_spool_bytes')).toBeGreaterThan(0);
    sql.down = false;
    await until('the spool replayed', drained(t));
    expect(await account(count, run, sent)).toEqual({ lost: [], duplicated: [], unknown: [] });
    expect(await metric(t, 'gateway_traces_replayed_total')).toBeGreaterThanOrEqual(1_000);
  });

  it('a restart with a non-empty spool, its last record torn by a crash: the next gateway on the data dir replays the rest', async () => {
    const dir = dataDir();
    const run = `pgl-restart-${Date.now().toString(36)}`;
    const first = await gateway(dir);
    // The key known, and its request's trace stored, before the outage.
    await chats(first, `warm-${run}`, 0, 1);
    await until('the warm-up trace stored', async () => (await count(`warm-${run}-%`)).length === 1);
    sql.down = true;
    const sent = await chats(first, run, 0, 300);
    await first.close();
    apps.splice(apps.indexOf(first), 1);
    // Nothing was dropped at shutdown: what the store could not take is on disk.
    expect({ spooled: await metric(first, 'gateway_traces_spooled_total'), dropped: await metric(first, 'gateway_traces_dropped_total') }).toEqual({ spooled: 300, dropped: 0 });
    const spool = join(dir, 'trace-spool');
    const last = readdirSync(spool).filter((f) => f.endsWith('.seg')).sort().pop()!;
    // A crash in the middle of the last append: its last record is cut short.
    truncateSync(join(spool, last), statSync(join(spool, last)).size - 25);

    sql.down = false;
    const second = await gateway(dir);
    await until('the spool replayed', drained(second));
    const got = await account(count, run, sent);
    expect(got.duplicated).toEqual([]);
    expect(got.unknown).toEqual([]);
    // The torn record is the last trace appended; every other one is stored.
    expect(got.lost).toHaveLength(1);
    expect(await metric(second, 'gateway_traces_dropped_total', { reason: 'spool_damaged' })).toBe(1);
    expect(await metric(second, 'gateway_traces_replayed_total')).toBe(299);
  });

  it('the spool cap reached: what neither the spool nor the buffer can hold is dropped, counted and logged', async () => {
    const t = await gateway(dataDir(), `${TEST_GATEWAY_YAML}\ntraces: { spool_max_bytes: 20000 }\n`);
    const run = `pgl-cap-${Date.now().toString(36)}`;
    const before = await chats(t, run, 0, 1);
    sql.down = true;
    const sent = [...before, ...(await chats(t, run, 1, 300))];
    await sleep(300);
    const dropped = await metric(t, 'gateway_traces_dropped_total', { reason: 'buffer_full' });
    expect(dropped).toBeGreaterThan(0);
    expect(await metric(t, 'gateway_trace_spool_bytes')).toBeLessThanOrEqual(20_000);
    expect(t.logs.some((l) => l.includes('"decision traces dropped"'))).toBe(true);
    sql.down = false;
    await until('the spool replayed', drained(t));
    const got = await account(count, run, sent);
    expect(got.duplicated).toEqual([]);
    expect(got.lost).toHaveLength(dropped);
  });
});

describeWithPostgres('trace spool on a real Postgres cut by a TCP proxy', () => {
  let db: TestDatabase;
  let pg: FaultProxy;
  let direct: Client;
  const dirs: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    pg = await FaultProxy.start(db.url);
    direct = new Client({ connectionString: db.url });
    await direct.connect();
  });
  afterAll(async () => {
    pg?.set('pass');
    await direct?.end();
    await pg?.close();
    await db?.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const count = async (like: string) => (await direct.query<{ request_id: string; n: number }>('SELECT request_id, count(*)::int AS n FROM decision_traces WHERE request_id LIKE $1 GROUP BY 1', [like])).rows;
  const yaml = `${TEST_GATEWAY_YAML}\nstores: { analytics_request_timeout_ms: 500, probe_interval_ms: 100, probe_timeout_ms: 300 }\n`;

  async function gateway(dataDir: string): Promise<TestApp> {
    return startTestApp({ yaml, env: { DATABASE_URL: pg.urlFor(db.url), GATEWAY_KEY_PEPPER: 'spool-e2e-pepper', GATEWAY_DATA_DIR: dataDir }, overrides: [{ provide: DecisionTraceWriterOptions, useValue: SMALL_BUFFER }] });
  }

  it('Postgres down for a burst of 1,000 chat requests, then back: exactly one row each, none lost, none duplicated; the breaker said when', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-spool-pg-'));
    dirs.push(dir);
    const t = await gateway(dir);
    try {
      const run = `pg-outage-${Date.now().toString(36)}`;
      const before = await chats(t, run, 0, 20);
      await until('the first traces written', async () => (await count(`${run}-%`)).length === 20);
      pg.set('down');
      const during = await chats(t, run, 20, 1_000);
      await until('the outage traces on disk', async () => (await metric(t, 'gateway_traces_spooled_total')) >= 1_000);
      expect(await metric(t, 'gateway_store_available', { store: 'analytics' })).toBe(0);
      expect(await metric(t, 'gateway_traces_dropped_total')).toBe(0);
      pg.set('pass');
      const after = await chats(t, run, 1_020, 40);
      await until('the spool replayed', drained(t));
      expect(await account(count, run, [...before, ...during, ...after])).toEqual({ lost: [], duplicated: [], unknown: [] });
    } finally {
      pg.set('pass');
      await t.close();
    }
  });

  it('a replica restarted during the outage keeps its spool: the next process on the data dir replays it once Postgres is back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-spool-pg-'));
    dirs.push(dir);
    const run = `pg-restart-${Date.now().toString(36)}`;
    const first = await gateway(dir);
    let sent: string[];
    try {
      await chats(first, `warm-${run}`, 0, 1);
      await until('the warm-up trace stored', async () => (await count(`warm-${run}-%`)).length === 1);
      pg.set('down');
      sent = await chats(first, run, 0, 300);
    } finally {
      await first.close();
    }
    expect(readdirSync(join(dir, 'trace-spool')).some((f) => f.endsWith('.seg'))).toBe(true);
    pg.set('pass');
    const second = await gateway(dir);
    try {
      await until('the spool replayed', drained(second));
      expect(await account(count, run, sent)).toEqual({ lost: [], duplicated: [], unknown: [] });
    } finally {
      await second.close();
    }
  });
});
