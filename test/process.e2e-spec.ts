/**
 * The real built server as a child process (`node dist/main.js`, what `npm start` runs): start-up
 * log, the demo key printed once on the first embedded start, graceful SIGTERM (readiness 503 while
 * an in-flight request finishes, no new connections, exit 0), and one-line start-up errors.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/main';
import { PgliteSqlStore } from '../src/stores/sql/pglite-sql.store';
import { ApiKeyHasher } from '../src/tenancy/api-key-hasher';
import { TenancyRepository } from '../src/tenancy/tenancy.repository';
import { loadEnv } from '../src/config/env';

const { freePort } = require('../scripts/test-servers') as { freePort(): Promise<number> };

const ROOT = join(__dirname, '..');
const SHIPPED_CONFIG = join(ROOT, 'config', 'gateway.yaml');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

jest.setTimeout(60_000);

interface Gateway {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  /** JSON log lines of stdout, parsed. */
  logs(): Array<Record<string, any>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Resolves with the first log line that satisfies `pred`, or rejects after `ms`. */
  waitForLog(pred: (l: Record<string, any>) => boolean, ms?: number): Promise<Record<string, any>>;
}

const running = new Set<ChildProcess>();
afterEach(() => {
  // A failed test must not leave its server behind; each child is ended by its own pid.
  for (const c of running) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  running.clear();
});

/** `node dist/main.js` with only the variables given (no DATABASE_URL/REDIS_URL leaking in from the test run). */
async function spawnGateway(env: Record<string, string>, nodeArgs: string[] = []): Promise<Gateway> {
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, 'dist/main.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HOST: '127.0.0.1', PORT: String(port), GATEWAY_CONFIG: SHIPPED_CONFIG, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const logs = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>);
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    stdout: () => out,
    stderr: () => err,
    logs,
    exited,
    async waitForLog(pred, ms = 15_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const hit = logs().find(pred);
        if (hit) return hit;
        if (Date.now() > deadline || child.exitCode !== null) {
          throw new Error(`no such log line within ${ms} ms; stdout:\n${out}\nstderr:\n${err}`);
        }
        await sleep(20);
      }
    },
  };
}

/** Milliseconds from `since` until GET /health answers 200 (polled), or throws after `ms`. */
async function untilHealthy(g: Gateway, since: number, ms = 30_000): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const res = await fetch(`${g.url}/health`, { signal: AbortSignal.timeout(1_000) });
      if (res.status === 200) return Date.now() - since;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || g.child.exitCode !== null) {
      throw new Error(`/health did not answer 200 within ${ms} ms; stdout:\n${g.stdout()}\nstderr:\n${g.stderr()}`);
    }
    await sleep(25);
  }
}

async function stop(g: Gateway): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const sent = Date.now();
  g.child.kill('SIGTERM');
  const r = await g.exited;
  return { code: r.code, signal: r.signal, ms: r.at - sent };
}

/** Whether a new TCP connection to the server's port is accepted. */
function accepts(url: string): Promise<boolean> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(port), '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

/** Sends `head` on a raw connection now; `finish()` sends the last CRLF and resolves with status and body. */
function rawRequest(url: string, head: string): Promise<{ socket: Socket; finish(): Promise<{ status: number; body: string }> }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let data = '';
    const ended = new Promise<string>((done) => {
      socket.setEncoding('utf8').on('data', (s: string) => (data += s));
      socket.once('close', () => done(data));
    });
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(head);
      resolve({
        socket,
        async finish() {
          socket.write('\r\n');
          const text = await ended;
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
          return { status, body: text.slice(text.indexOf('\r\n\r\n') + 4) };
        },
      });
    });
  });
}

const DEMO_BANNER = 'Demo organisation created.';
const KEY = /gw-[A-Za-z0-9_-]{43}/g;

const tmp = mkdtempSync(join(tmpdir(), 'gw-process-'));
const dataDir = join(tmp, 'data');
const timings: Record<string, number> = {};

beforeAll(() => {
  const started = Date.now();
  const r = spawnSync(process.execPath, [require.resolve('@nestjs/cli/bin/nest.js'), 'build'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`nest build failed:\n${r.stdout}\n${r.stderr}`);
  timings.build = Date.now() - started;
});

afterAll(() => {
  console.info(
    `process timings (ms): nest build ${timings.build}; start-up spawn → /health 200: cold (fresh data dir) ${timings.cold}, ` +
      `warm (second start) ${timings.warm}; self-reported startup_ms cold ${timings.coldSelf}, warm ${timings.warmSelf}`,
  );
  rmSync(tmp, { recursive: true, force: true });
});

describe('node dist/main.js on the embedded default', () => {
  let demoKey: string;

  it('first start: logs "gateway listening", answers /health, prints the demo key once; SIGTERM exits 0', async () => {
    const spawned = Date.now();
    const g = await spawnGateway({ GATEWAY_DATA_DIR: dataDir });
    timings.cold = await untilHealthy(g, spawned);
    const listening = await g.waitForLog((l) => l.msg === 'gateway listening');
    expect(listening).toMatchObject({ level: 'info', url: g.url, startup_ms: expect.any(Number) });
    timings.coldSelf = listening.startup_ms;

    const health = await fetch(`${g.url}/health`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);

    const out = g.stdout();
    expect(out.split(DEMO_BANNER)).toHaveLength(2);
    const keys = new Set(out.match(KEY));
    expect(keys.size).toBe(1);
    demoKey = [...keys][0];
    // The banner is for the terminal: no log line carries the key.
    for (const line of out.split('\n').filter((l) => l.startsWith('{'))) expect(line).not.toContain(demoKey);

    const stopped = await stop(g);
    expect([stopped.code, stopped.signal]).toEqual([0, null]);
    expect(g.stderr()).toBe('');
    expect(g.logs().map((l) => l.msg)).toEqual(expect.arrayContaining(['draining', 'stopped']));
  });

  it('the demo key is stored hashed and resolves to the demo organisation with read and write', async () => {
    expect(demoKey).toBeDefined();
    const listed: string[] = [];
    const write = process.stdout.write;
    const saved = { GATEWAY_DATA_DIR: process.env.GATEWAY_DATA_DIR, GATEWAY_CONFIG: process.env.GATEWAY_CONFIG };
    process.env.GATEWAY_DATA_DIR = dataDir;
    process.env.GATEWAY_CONFIG = SHIPPED_CONFIG;
    process.stdout.write = ((s: string) => (listed.push(String(s)), true)) as typeof process.stdout.write;
    let code: number;
    try {
      code = await runCli(['orgs', 'list']);
    } finally {
      process.stdout.write = write;
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    expect(code).toBe(0);
    const rows = listed.join('').trim().split('\n').slice(1).map((l) => l.split('\t'));
    expect(rows).toEqual([['demo', 'pro', 'has_test_ab,feedback_routing,explain', 'unlimited', '-', '1', 'demo']]);

    // What the API-key guard does: hash with the data dir's pepper, look the hash up.
    const hasher = ApiKeyHasher.fromEnv(loadEnv({ GATEWAY_DATA_DIR: dataDir }));
    const store = await PgliteSqlStore.create({ dataDir: join(dataDir, 'pglite') });
    try {
      const caller = await new TenancyRepository(store).findCallerByHash(hasher.hash(demoKey));
      // The demo key operates its organisation too (docs/api.md "Admin API").
      expect(caller).toMatchObject({ orgId: 'demo', keyId: 'demo-key', plan: 'pro', permissions: ['read', 'write', 'admin'] });
      const rowsText = await store.query<{ t: string }>('SELECT row_to_json(k)::text AS t FROM api_keys k');
      for (const r of rowsText.rows) expect(r.t).not.toContain(demoKey.slice(3));
    } finally {
      await store.close();
    }
    expect(readFileSync(join(dataDir, 'key-pepper'), 'utf8')).not.toContain(demoKey);
  });

  it('second start on the same data dir prints no key (warm start-up measured)', async () => {
    const spawned = Date.now();
    const g = await spawnGateway({ GATEWAY_DATA_DIR: dataDir });
    timings.warm = await untilHealthy(g, spawned);
    timings.warmSelf = (await g.waitForLog((l) => l.msg === 'gateway listening')).startup_ms;
    const stopped = await stop(g);
    expect(stopped.code).toBe(0);
    expect(g.stdout()).not.toContain(DEMO_BANNER);
    expect(g.stdout()).not.toMatch(KEY);
  });

  it('tracing off on the embedded stores: the OpenTelemetry SDK, pg and ioredis are never loaded (each is, once configured)', async () => {
    // docs/architecture.md "Memory: what an idle gateway holds": what a gateway never runs stays on disk.
    const preload = ['-r', join(ROOT, 'test', 'support', 'loaded-packages.js')];
    const loaded = (file: string): string[] => JSON.parse(readFileSync(file, 'utf8'));
    const off = join(tmp, 'loaded-off.json');
    const g = await spawnGateway({ GATEWAY_DATA_DIR: dataDir, LOADED_PACKAGES_OUT: off }, preload);
    await untilHealthy(g, Date.now());
    const res = await fetch(`${g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${demoKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-fast', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    expect((await stop(g)).code).toBe(0);
    const never = ['@opentelemetry/sdk-trace-base', '@opentelemetry/otlp-transformer', '@opentelemetry/semantic-conventions', 'pg', 'pg-cursor', 'ioredis'];
    expect(loaded(off)).toEqual(expect.arrayContaining(['@nestjs/core', '@opentelemetry/api']));
    expect(loaded(off).filter((name) => never.includes(name))).toEqual([]);

    // Configured, each is loaded: tracing to a collector that is not there, Redis that is not there
    // (the gateway starts and serves without it), then Postgres that is not there (start-up fails).
    const on = join(tmp, 'loaded-on.json');
    const closed = await freePort();
    const traced = await spawnGateway(
      { GATEWAY_DATA_DIR: dataDir, LOADED_PACKAGES_OUT: on, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closed}`, REDIS_URL: `redis://127.0.0.1:${closed}` },
      preload,
    );
    await untilHealthy(traced, Date.now());
    expect((await stop(traced)).code).toBe(0);
    expect(loaded(on)).toEqual(expect.arrayContaining(['@opentelemetry/sdk-trace-base', '@opentelemetry/otlp-transformer', 'ioredis']));
    const pg = join(tmp, 'loaded-pg.json');
    const failed = await spawnGateway(
      { GATEWAY_DATA_DIR: join(tmp, 'unused'), LOADED_PACKAGES_OUT: pg, DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/x`, GATEWAY_KEY_PEPPER: 'p' },
      preload,
    );
    expect((await failed.exited).code).toBe(1);
    expect(loaded(pg)).toContain('pg');
  });

  it('SIGTERM: readiness turns 503, no new connections, the in-flight request finishes, exit 0', async () => {
    // The shipped configuration plus a model whose mock answer takes 1.5 s: a request held in flight.
    const config = join(tmp, 'slow.yaml');
    writeFileSync(
      config,
      readFileSync(SHIPPED_CONFIG, 'utf8').replace(/^models:\n/m, 'models:\n  mock-slow: { provider: mock, type: chat, upstream: "mock-fast+slow-1500" }\n'),
    );
    const g = await spawnGateway({ GATEWAY_DATA_DIR: dataDir, GATEWAY_CONFIG: config, GATEWAY_DRAIN_TIMEOUT_MS: '10000' });
    await untilHealthy(g, Date.now());
    // Opened before SIGTERM, its request not yet complete: not idle, so draining does not drop it.
    const late = await rawRequest(g.url, `GET /health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n`);
    const inFlight = fetch(`${g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${demoKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-slow', messages: [{ role: 'user', content: 'hi' }] }),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any, at: Date.now() }));
    await sleep(200);

    const sent = Date.now();
    g.child.kill('SIGTERM');
    const draining = await g.waitForLog((l) => l.msg === 'draining', 5_000);
    expect(draining).toMatchObject({ signal: 'SIGTERM', in_flight: 1 });

    expect(await accepts(g.url)).toBe(false);
    const ready = await late.finish();
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toMatchObject({ status: 'down', draining: true });

    // The request that was in flight when SIGTERM came got its whole answer.
    const held = await inFlight;
    expect(held.status).toBe(200);
    expect(held.body).toMatchObject({ object: 'chat.completion', model: 'mock-slow' });

    const exit = await g.exited;
    expect([exit.code, exit.signal]).toEqual([0, null]);
    expect(exit.at - sent).toBeLessThan(5_000);
    expect(held.at).toBeLessThanOrEqual(exit.at);
    expect(g.logs().some((l) => l.msg === 'drain timeout reached; closing remaining connections')).toBe(false);
    expect(g.logs().at(-1)).toMatchObject({ msg: 'stopped' });
  });
});

describe('start-up errors', () => {
  it('a config error: exit 1, exactly one line on stderr, no stack trace', async () => {
    const file = join(tmp, 'bad.yaml');
    writeFileSync(file, readFileSync(SHIPPED_CONFIG, 'utf8').replace('mock: { family: mock }', 'mock: { family: mock, colour: red }'));
    const g = await spawnGateway({ GATEWAY_DATA_DIR: join(tmp, 'unused'), GATEWAY_CONFIG: file });
    const exit = await g.exited;
    expect([exit.code, exit.signal]).toEqual([1, null]);
    expect(g.stderr()).toBe(
      `gateway: config error: providers.mock.colour: unknown key (allowed: family, base_url, api_key, api_version, headers, timeouts, max_response_bytes) (in ${file})\n`,
    );
    expect(g.stdout()).not.toContain('gateway listening');
  });

  it('an environment error: exit 1, one line', async () => {
    const g = await spawnGateway({ GATEWAY_DATA_DIR: join(tmp, 'unused'), PORT: 'eighty' });
    const exit = await g.exited;
    expect(exit.code).toBe(1);
    expect(g.stderr()).toBe('gateway: config error: PORT: must be an integer from 0 to 65535, got "eighty"\n');
  });

  it('an unreachable DATABASE_URL: exit 1, one line on stderr, no stack trace', async () => {
    const port = await freePort();
    const g = await spawnGateway({ GATEWAY_DATA_DIR: join(tmp, 'unused'), DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/x`, GATEWAY_KEY_PEPPER: 'p' });
    const exit = await g.exited;
    expect(exit.code).toBe(1);
    expect(g.stderr()).toBe(
      `gateway: failed to start: analytics store: cannot reach Postgres at 127.0.0.1:${port}/x (DATABASE_URL): connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    expect(g.stdout()).not.toMatch(/\n\s+at /);
  });
});
