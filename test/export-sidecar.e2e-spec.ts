/**
 * `gateway export --follow` as the sidecar runs it (docs/operations.md "Decisions export"): the built
 * CLI in a child process on real Postgres, writing NDJSON into a directory.
 * - Killed (SIGKILL) while a file is being written and started again, it has exported every row
 *   exactly once: the half-written file is thrown away, the completed ones are not written again.
 * - The analytics store cut off (the fault proxy) pauses it; rows committed meanwhile, some with a
 *   created_at days old, are exported once the store answers again, each once.
 * - SIGTERM completes the open file and exits 0.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PgSqlStore } from '../src/stores/sql/pg-sql.store';
import { FaultProxy } from './support/fault-proxy';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { describeWithPostgres } from './support/real-servers';

const procs = require('../bench/lib/procs') as { buildGateway(name: string): { main: string; remove(): void } };

jest.setTimeout(240_000);

const ROOT = join(__dirname, '..');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const INSERT = `
  INSERT INTO decision_traces (created_at, id, latency_ms, status, request_id, org_id, api_key_id, endpoint, requested_model, selected_provider, selected_model, candidates)
  SELECT $3::timestamptz - (g % 600) * interval '1 second', 2000000000 + g, 10 + g % 50, 200, 'req-' || g, 'org-' || (g % 3), 'key', 'chat', 'auto', 'mock', 'm' || (g % 5),
         jsonb_build_array(jsonb_build_object('provider', 'mock', 'model', 'm' || (g % 5), 'score', 0.25))
  FROM generate_series($1::bigint, $2::bigint - 1) g`;

interface Sidecar {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

describeWithPostgres('gateway export --follow (sidecar, real Postgres)', () => {
  let build: { main: string; remove(): void };
  let db: TestDatabase;
  let store: PgSqlStore;
  const tmp = mkdtempSync(join(tmpdir(), 'gw-export-sidecar-'));
  const running = new Set<ChildProcess>();
  let inserted = 0;

  const insert = async (n: number, createdAt = new Date()) => {
    await store.query(INSERT, [inserted, inserted + n, createdAt.toISOString()]);
    inserted += n;
  };

  function start(out: string, url: string): Sidecar {
    const child = spawn(
      process.execPath,
      [join(build.main, '..', 'cli', 'main.js'), 'export', '--follow', '--out', out, '--rotate-bytes', '64KiB', '--rotate-seconds', '1', '--batch-rows', '200'],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: url, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    running.add(child);
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
    child.stdout!.resume();
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    return { child, stderr: () => err, exited };
  }

  /** Every exported request id with how many times it appears in a complete file. */
  function exported(out: string): Map<string, number> {
    const dir = join(out, 'traces');
    const seen = new Map<string, number>();
    if (!existsSync(dir)) return seen;
    for (const f of readdirSync(dir).filter((x) => x.startsWith('part-'))) {
      for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
        if (!line) continue;
        const id = JSON.parse(line).request_id as string;
        seen.set(id, (seen.get(id) ?? 0) + 1);
      }
    }
    return seen;
  }

  /** A data file being written (`.part-<from>.<ext>.tmp`), not the cursor's own temporary file, renamed at once. */
  const halfWritten = (f: string) => f.startsWith('.part-') && f.endsWith('.tmp');

  async function until(what: string, ok: () => boolean, ms = 90_000, side?: Sidecar): Promise<void> {
    const deadline = Date.now() + ms;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${side ? `\nsidecar stderr:\n${side.stderr().slice(-4000)}` : ''}`);
      await sleep(25);
    }
  }

  const everyRowOnce = (out: string) => {
    const seen = exported(out);
    const twice = [...seen].filter(([, n]) => n > 1).map(([id]) => id);
    const missing: string[] = [];
    for (let g = 0; g < inserted; g++) if (!seen.has(`req-${g}`)) missing.push(`req-${g}`);
    return { rows: seen.size, twice: twice.slice(0, 5), missing: missing.slice(0, 5), extra: seen.size - (inserted - missing.length) };
  };

  beforeAll(async () => {
    // A private build: process.e2e-spec rebuilds dist/ while other suites run.
    build = procs.buildGateway(`export-${process.pid}`);
    db = await createTestDatabase();
    store = new PgSqlStore(db.url);
  });
  afterEach(() => {
    for (const c of running) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    running.clear();
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
    build?.remove();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('killed with SIGKILL in the middle of a file and started again: every row exactly once', async () => {
    const out = join(tmp, 'killed');
    for (let i = 0; i < 4; i++) await insert(5_000);
    const first = start(out, db.url);
    const dir = join(out, 'traces');
    // Two complete files: the export is under way.
    await until('two complete files', () => existsSync(dir) && readdirSync(dir).filter((f) => f.startsWith('part-')).length >= 2, 90_000, first);
    // Freeze it and kill it only while a file is half-written. Polling alone cannot be relied on to
    // see one: on a quiet machine a file of 200 rows is written and renamed within a few
    // milliseconds, and on a loaded one it may be completed between a check and the signal.
    for (let i = 0; i < 500; i++) {
      first.child.kill('SIGSTOP');
      await new Promise((r) => setTimeout(r, 5));
      if (readdirSync(dir).some(halfWritten)) break;
      first.child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 20));
    }
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    const before = exported(out).size;
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(inserted);
    expect(readdirSync(dir).some(halfWritten)).toBe(true);

    // Meanwhile rows arrive, some of them replayed days late.
    await insert(300);
    await insert(200, new Date(Date.now() - 2 * 86_400_000));
    const second = start(out, db.url);
    await until('every row exported', () => exported(out).size >= inserted, 120_000, second);
    expect(everyRowOnce(out)).toEqual({ rows: inserted, twice: [], missing: [], extra: 0 });
    expect(second.stderr()).toContain('export resumes from its cursor');

    // SIGTERM: the open file (if any) is completed, and the exit is clean.
    await insert(50);
    await until('the newest rows exported', () => exported(out).size >= inserted, 60_000, second);
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(everyRowOnce(out)).toEqual({ rows: inserted, twice: [], missing: [], extra: 0 });
  });

  it('pauses while the analytics store is cut off and resumes when it answers: rows of the outage exported once', async () => {
    const out = join(tmp, 'outage');
    const proxy = await FaultProxy.start(db.url);
    try {
      const side = start(out, proxy.urlFor(db.url));
      await until('caught up', () => exported(out).size >= inserted, 120_000, side);
      proxy.set('down');
      // Written while the sidecar cannot reach the store (the gateway still can).
      await insert(400);
      await insert(100, new Date(Date.now() - 3 * 86_400_000));
      await until('the pause logged', () => side.stderr().includes('analytics store unavailable: export paused'), 30_000, side);
      expect(exported(out).size).toBeLessThan(inserted);
      proxy.set('pass');
      await until('the outage rows exported', () => exported(out).size >= inserted, 120_000, side);
      expect(everyRowOnce(out)).toEqual({ rows: inserted, twice: [], missing: [], extra: 0 });
      side.child.kill('SIGTERM');
      expect((await side.exited).code).toBe(0);
    } finally {
      await proxy.close();
    }
  });
});
