/**
 * One PGlite data directory, one process (PgliteDirLock): real child processes open the embedded
 * store, the server and the CLI from a private build of the working tree, and are closed, refused or
 * killed with SIGKILL. A second opener fails with one line naming the directory and the holder's pid,
 * never waits, and takes over a lock whose holder is gone (dead, or its pid reused).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PgliteSqlStore } from '../src/stores/sql/pglite-sql.store';
import { PgliteWorkerSqlStore } from '../src/stores/sql/pglite-worker-sql.store';
import { createTestPglite } from './support/pglite';

const procs = require('../bench/lib/procs') as { buildGateway(name: string): { main: string; remove(): void } };
const { freePort } = require('../scripts/test-servers') as { freePort(): Promise<number> };

jest.setTimeout(90_000);

const ROOT = join(__dirname, '..');
const SHIPPED_CONFIG = join(ROOT, 'config', 'gateway.yaml');
const LOCK_FILE = 'gateway.lock';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** What a refused opener says (after the prefix of whoever prints it). */
const inUse = (dir: string, pid: number) =>
  `the embedded database in ${dir} is in use by another process (pid ${pid} on ${hostname()}, started ${ISO}); ` +
  'stop it first: two processes must never open one PGlite data directory';
const ISO = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';

let build: { main: string; remove(): void };
let dist: string;
const tmp = mkdtempSync(join(tmpdir(), 'gw-dir-lock-'));
const template = join(tmp, 'template');
let n = 0;
/** A data dir with a database in it (a copy of one made once: initdb takes seconds). */
function freshDir(): string {
  const dir = join(tmp, `dir-${++n}`);
  cpSync(template, dir, { recursive: true });
  return dir;
}

beforeAll(async () => {
  // A private build: process.e2e-spec rebuilds dist/ (deleting it first) while other suites run.
  build = procs.buildGateway(`run-${process.pid}`);
  dist = join(build.main, '..');
  await close(await holder('worker', template));
});
afterAll(() => {
  build?.remove();
  rmSync(tmp, { recursive: true, force: true });
});

interface Child {
  child: ChildProcess;
  pid: number;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when stdout has `text`; rejects when the child exits first or after `ms`. */
  waitFor(text: string, ms?: number): Promise<void>;
}

const running = new Set<ChildProcess>();
afterEach(() => {
  // A failed test must not leave its children behind; each is ended by its own pid.
  for (const c of running) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  running.clear();
});

function start(args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    pid: child.pid!,
    stdout: () => out,
    stderr: () => err,
    exited,
    async waitFor(text, ms = 30_000) {
      const deadline = Date.now() + ms;
      while (!out.includes(text)) {
        if (Date.now() > deadline || child.exitCode !== null) {
          throw new Error(`no "${text}" on stdout within ${ms} ms; stdout:\n${out}\nstderr:\n${err}`);
        }
        await sleep(20);
      }
    },
  };
}

/*
 * A process that opens the built store on `dir` (argv: worker|inprocess, dir), prints "open", and
 * closes it when told "close" on stdin; "write" adds a row. A store that cannot open: its message on
 * stderr, exit 1.
 */
const HOLDER = String.raw`
const [kind, dir, dist] = process.argv.slice(1);
const { PgliteSqlStore } = require(dist + '/stores/sql/pglite-sql.store.js');
const { PgliteWorkerSqlStore } = require(dist + '/stores/sql/pglite-worker-sql.store.js');
(async () => {
  let store;
  try {
    store = await (kind === 'worker' ? PgliteWorkerSqlStore : PgliteSqlStore).create({ dataDir: dir });
  } catch (err) {
    process.stderr.write(err.message + '\n');
    process.exit(1);
  }
  const rows = await store.query('SELECT count(*)::int AS n FROM pg_tables WHERE tablename = $1', ['kept']);
  process.stdout.write('open ' + JSON.stringify(rows.rows[0]) + '\n');
  process.stdin.setEncoding('utf8').on('data', async (cmd) => {
    if (cmd.includes('write')) {
      await store.query('CREATE TABLE IF NOT EXISTS kept (v int); INSERT INTO kept VALUES (1)');
      process.stdout.write('written\n');
    }
    if (cmd.includes('close')) {
      await store.close();
      process.stdout.write('closed\n');
      process.exit(0);
    }
  });
})();
`;

async function holder(kind: 'worker' | 'inprocess', dir: string): Promise<Child> {
  const c = start(['-e', HOLDER, kind, dir, dist]);
  await c.waitFor('open');
  return c;
}

/** A holder that must fail: resolves with its exit and stderr. */
async function refused(kind: 'worker' | 'inprocess', dir: string): Promise<{ code: number | null; stderr: string; ms: number }> {
  const started = Date.now();
  const c = start(['-e', HOLDER, kind, dir, dist]);
  const exit = await c.exited;
  return { code: exit.code, stderr: c.stderr(), ms: Date.now() - started };
}

async function close(c: Child): Promise<void> {
  c.child.stdin!.write('close\n');
  await c.waitFor('closed');
  expect((await c.exited).code).toBe(0);
}

const lockOf = (dir: string) => JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as Record<string, unknown> & { pid: number };

describe('two processes on one PGlite data dir', () => {
  it.each([
    ['worker', 'worker'],
    ['worker', 'inprocess'],
    ['inprocess', 'worker'],
  ] as const)('%s store open → a %s store in another process fails at once naming the dir and pid; after close it opens', async (first, second) => {
    const dir = freshDir();
    const a = await holder(first, dir);
    expect(lockOf(dir)).toMatchObject({ pid: a.pid, hostname: hostname() });

    const r = await refused(second, dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^${esc(inUse(dir, a.pid)).replace(esc(ISO), ISO)}\n$`));
    // Refused before PGlite starts, without waiting on the holder (generous: the machine may be busy).
    expect(r.ms).toBeLessThan(10_000);

    // The holder was not disturbed.
    a.child.stdin!.write('write\n');
    await a.waitFor('written');
    await close(a);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);

    const b = await holder(second, dir);
    expect(b.stdout()).toContain('open {"n":1}');
    expect(lockOf(dir).pid).toBe(b.pid);
    await close(b);
  });

  it('a lock left by a process killed with SIGKILL is taken over, and the data it committed is there', async () => {
    const dir = freshDir();
    const a = await holder('worker', dir);
    a.child.stdin!.write('write\n');
    await a.waitFor('written');
    a.child.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');
    expect(lockOf(dir).pid).toBe(a.pid);

    const b = await holder('worker', dir);
    expect(b.stdout()).toContain('open {"n":1}');
    expect(lockOf(dir).pid).toBe(b.pid);
    await close(b);
  });

  it('a lock whose pid now belongs to another process (pid reused) is taken over; the same pid with its own start time is not', async () => {
    // Linux: the start time of a pid comes from /proc/<pid>/stat. A real lock file, written by a real holder, then edited.
    const dir = freshDir();
    const a = await holder('worker', dir);
    const record = lockOf(dir);
    await close(a);

    const other = start(['-e', 'setTimeout(() => {}, 60_000); process.stdout.write("up\\n")']);
    await other.waitFor('up');
    const stat = readFileSync(`/proc/${other.pid}/stat`, 'utf8');
    const ticks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];

    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ ...record, pid: other.pid, startTicks: ticks, token: 'live' }));
    const r = await refused('worker', dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`is in use by another process (pid ${other.pid} on ${hostname()}`);

    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ ...record, pid: other.pid, startTicks: String(Number(ticks) - 1), token: 'reused' }));
    const b = await holder('worker', dir);
    expect(lockOf(dir).pid).toBe(b.pid);
    await close(b);
    other.child.kill('SIGKILL');
  });

  it('a lock from a holder that cannot be checked (another host) is refused while refreshed, taken over 30 s after its last refresh', async () => {
    const dir = freshDir();
    const a = await holder('worker', dir);
    const record = lockOf(dir);
    await close(a);
    const lock = join(dir, LOCK_FILE);
    writeFileSync(lock, JSON.stringify({ ...record, hostname: 'elsewhere', pid: 4242, token: 'remote' }));
    const r = await refused('worker', dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `^the embedded database in ${esc(dir)} is in use by another process \\(pid 4242 on elsewhere, started ${ISO}\\) that cannot be checked from here ` +
          `\\(another host or container\\); its lock ${esc(lock)} was refreshed \\d+ s ago and counts as abandoned after 30 s without a refresh\n$`,
      ),
    );
    const minuteAgo = new Date(Date.now() - 60_000);
    utimesSync(lock, minuteAgo, minuteAgo);
    const b = await holder('worker', dir);
    expect(lockOf(dir).pid).toBe(b.pid);
    await close(b);
  });

  it('the worker store holds the lock across a worker crash and its restart, until close', async () => {
    const dir = freshDir();
    const store = await PgliteWorkerSqlStore.create({ dataDir: dir });
    try {
      await store.crashForTest();
      // No worker has the database open now: the process still holds the directory.
      const during = await refused('inprocess', dir);
      expect(during.code).toBe(1);
      expect(during.stderr).toContain(`is in use by another process (pid ${process.pid} on`);
      let up = false;
      for (let i = 0; i < 100 && !up; i++) {
        await sleep(100);
        up = await store.query('SELECT 1', []).then(() => true, () => false);
      }
      expect(up).toBe(true);
      expect(lockOf(dir).pid).toBe(process.pid);
      expect((await refused('worker', dir)).code).toBe(1);
    } finally {
      await store.close();
    }
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    await close(await holder('inprocess', dir));
  });
});

describe('in one process', () => {
  it('a file-backed dir is refused a second time while open; in-memory stores take no lock', async () => {
    const dir = freshDir();
    const store = await PgliteSqlStore.create({ dataDir: dir });
    try {
      await expect(PgliteWorkerSqlStore.create({ dataDir: dir })).rejects.toThrow(
        `the embedded database in ${dir} is already open in this process (pid ${process.pid})`,
      );
      const memory = await Promise.all([createTestPglite(), createTestPglite()]);
      await Promise.all(memory.map((m) => m.close()));
    } finally {
      await store.close();
    }
    const again = await PgliteWorkerSqlStore.create({ dataDir: dir });
    await again.close();
  });
});

describe('server and CLI on one GATEWAY_DATA_DIR', () => {
  it('a CLI command or a second server while the server runs: exit 1, one line naming the dir and the server pid; after SIGTERM the CLI works', async () => {
    const dataDir = join(tmp, 'gateway-data');
    const pgliteDir = join(dataDir, 'pglite');
    const env = { GATEWAY_DATA_DIR: dataDir, GATEWAY_CONFIG: SHIPPED_CONFIG, HOST: '127.0.0.1' };
    const port = await freePort();
    const server = start([build.main], { ...env, PORT: String(port) });
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health/ready`).then((r) => r.status === 200, () => false);
      if (ok) break;
      if (Date.now() > deadline || server.child.exitCode !== null) throw new Error(`server not ready; stderr:\n${server.stderr()}`);
      await sleep(50);
    }
    const message = new RegExp(`${esc(inUse(pgliteDir, server.pid)).replace(esc(ISO), ISO)}\n$`);

    for (const argv of [['migrate'], ['keys', 'create', '--org', 'demo'], ['orgs', 'list']]) {
      const cli = start([join(dist, 'cli', 'main.js'), ...argv], env);
      expect(await cli.exited).toEqual({ code: 1, signal: null });
      expect(cli.stdout()).toBe('');
      expect(cli.stderr()).toMatch(new RegExp(`^gateway: failed: analytics store: ${message.source}`));
    }

    const second = start([build.main], { ...env, PORT: String(await freePort()) });
    expect(await second.exited).toEqual({ code: 1, signal: null });
    expect(second.stderr()).toMatch(new RegExp(`^gateway: failed to start: analytics store: ${message.source}`));

    // The server kept serving, and stops cleanly.
    expect((await fetch(`http://127.0.0.1:${port}/health/ready`)).status).toBe(200);
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(join(pgliteDir, LOCK_FILE))).toBe(false);

    const migrate = start([join(dist, 'cli', 'main.js'), 'migrate'], env);
    expect(await migrate.exited).toEqual({ code: 0, signal: null });
    expect(migrate.stdout()).toBe('migrations are up to date (embedded pglite); 0 configured organizations upserted\n');
    const list = start([join(dist, 'cli', 'main.js'), 'orgs', 'list'], env);
    expect(await list.exited).toEqual({ code: 0, signal: null });
    expect(list.stdout()).toMatch(/^demo\t/m);
  });
});
