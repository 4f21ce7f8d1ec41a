/**
 * The `gateway` CLI (README "CLI"), run in-process through runCli(argv):
 * exit codes 0/1/2, one-line errors on stderr, keys printed once and stored only as hashes, and
 * keys made by the CLI accepted (then refused once revoked) by the real app on the same database.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { runCli } from '../src/cli/main';
import { loadEnv } from '../src/config/env';
import { createSqlStore } from '../src/stores/sql/sql-store.factory';
import { startTestApp, TestApp } from './support/app';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { ProbeController } from './support/probe.controller';
import { describeWithPostgres } from './support/real-servers';

const SHIPPED_CONFIG = join(__dirname, '..', 'config', 'gateway.yaml');
/** Every variable the CLI reads (README "Environment"); each test sets its own and gets the rest unset. */
const CLI_ENV = [
  'GATEWAY_CONFIG', 'GATEWAY_DATA_DIR', 'DATABASE_URL', 'REDIS_URL', 'VECTOR_DATABASE_URL', 'GATEWAY_KEY_PEPPER', 'LOG_LEVEL', 'PORT', 'HOST',
];

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** runCli with stdout/stderr captured and `env` as the only CLI variables set; everything restored after. */
async function cli(argv: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const savedEnv = Object.fromEntries([...CLI_ENV, ...Object.keys(env)].map((k) => [k, process.env[k]]));
  for (const k of CLI_ENV) delete process.env[k];
  Object.assign(process.env, env);
  const out: string[] = [];
  const err: string[] = [];
  const stdoutWrite = process.stdout.write;
  const stderrWrite = process.stderr.write;
  const capture = (sink: string[]) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      sink.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      cb?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture(out);
  process.stderr.write = capture(err);
  const started = Date.now();
  try {
    const code = await runCli(argv);
    return { code, stdout: out.join(''), stderr: err.join(''), ms: Date.now() - started };
  } finally {
    process.stdout.write = stdoutWrite;
    process.stderr.write = stderrWrite;
    for (const [k, v] of Object.entries(savedEnv)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

const tmp = mkdtempSync(join(tmpdir(), 'gw-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(tmp, name);
  writeFileSync(path, text);
  return path;
}

const VALID = `
providers:
  mock: { family: mock }
  openai: { family: openai, base_url: "https://api.openai.com/v1", api_key: "\${GW_CLI_TEST_OPENAI_KEY}" }
models:
  mock-fast: { provider: mock, type: chat }
routes:
  - { name: default, models: [auto], targets: [mock/mock-fast] }
`;

describe('gateway config check', () => {
  it('accepts the shipped config/gateway.yaml', async () => {
    const r = await cli(['config', 'check', SHIPPED_CONFIG]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toBe(`${SHIPPED_CONFIG}: OK (1 providers, 3 models, 1 routes, 0 organizations)\n`);
  });

  it('expands ${VAR} from the environment', async () => {
    const path = file('valid.yaml', VALID);
    const r = await cli(['config', 'check', path], { GW_CLI_TEST_OPENAI_KEY: 'sk-cli-test' });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toContain(`${path}: OK (2 providers`);
    expect(r.stdout).not.toContain('sk-cli-test');
  });

  const withVar = { GW_CLI_TEST_OPENAI_KEY: 'sk-cli-test' };
  it.each([
    [
      'an unknown key',
      'unknown-key.yaml',
      VALID.replace('mock: { family: mock }', 'mock: { family: mock, colour: red }'),
      withVar,
      'providers.mock.colour: unknown key (allowed: family, base_url, api_key, api_version, headers, timeouts, max_response_bytes)',
    ],
    [
      'bad YAML',
      'bad.yaml',
      'providers:\n  mock: [1, 2\n',
      withVar,
      'invalid YAML at line 3, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]',
    ],
    ['a missing ${VAR}', 'missing-var.yaml', VALID, {}, 'providers.openai.api_key: environment variable GW_CLI_TEST_OPENAI_KEY is not set'],
    [
      'an unknown provider in a model',
      'unknown-provider.yaml',
      VALID.replace('mock-fast: { provider: mock', 'mock-fast: { provider: mokc'),
      withVar,
      'models.mock-fast.provider: unknown provider "mokc"',
    ],
  ])('refuses %s: exit 1 and one line naming the field and the file', async (_what, name, text, env, detail) => {
    const path = file(name, text);
    const r = await cli(['config', 'check', path], env);
    expect(r).toEqual({ code: 1, stdout: '', stderr: `gateway: config error: ${detail} (in ${path})\n`, ms: expect.any(Number) });
  });

  it('refuses a missing file: exit 1, one line', async () => {
    const path = join(tmp, 'nowhere.yaml');
    const r = await cli(['config', 'check', path]);
    expect(r).toEqual({ code: 1, stdout: '', stderr: `gateway: config error: cannot read config file ${path}: ENOENT\n`, ms: expect.any(Number) });
  });

  it('usage errors exit 2', async () => {
    expect((await cli(['config', 'check'])).code).toBe(2);
    expect((await cli(['frobnicate'])).code).toBe(2);
  });
});

describe('gateway orgs list (embedded)', () => {
  it('works on a fresh data dir with the shipped config', async () => {
    const dataDir = mkdtempSync(join(tmp, 'data-'));
    const r = await cli(['orgs', 'list'], { GATEWAY_DATA_DIR: dataDir, GATEWAY_CONFIG: SHIPPED_CONFIG });
    console.info(`gateway orgs list, embedded, fresh data dir: ${r.ms} ms`);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.split('\n')[0]).toBe('id\tplan\tfeatures\tmonthly_limit\tkill_switches\tactive_keys\tsource');
    // Opening PGlite and migrating takes seconds; an order of magnitude more means something is wrong.
    expect(r.ms).toBeLessThan(20_000);
  });
});

describe('gateway prune (embedded)', () => {
  const dataDir = mkdtempSync(join(tmp, 'prune-'));
  const env = () => ({ GATEWAY_DATA_DIR: dataDir, GATEWAY_CONFIG: file('prune.yaml', 'learning: { window_days: 30 }\n') });
  /** Old traces left, and whether their day's partition is still there. */
  const left = async (): Promise<{ traces: number; partition: boolean }> => {
    const store = await createSqlStore(loadEnv(env()));
    try {
      const { rows } = await store.query<{ traces: number; partition: boolean }>(
        `SELECT (SELECT count(*)::int FROM decision_traces WHERE created_at < '2021-01-01') AS traces, to_regclass('decision_traces_p20200101') IS NOT NULL AS partition`,
        [],
      );
      return rows[0];
    } finally {
      await store.close();
    }
  };

  beforeAll(async () => {
    // A day long past retention, with its partition, and a stray old trace in the default partition.
    const store = await createSqlStore(loadEnv(env()));
    try {
      await store.query(
        `CREATE TABLE decision_traces_p20200101 PARTITION OF decision_traces
           FOR VALUES FROM (timestamptz '2020-01-01 00:00:00+00') TO (timestamptz '2020-01-02 00:00:00+00')`,
        [],
      );
      await store.query(
        `INSERT INTO decision_traces (id, request_id, org_id, api_key_id, endpoint, requested_model, status, latency_ms, created_at)
         SELECT g, 'old-' || g, 'acme', 'k', 'chat', 'auto', 200, 1, timestamptz '2020-01-01 12:00:00+00' FROM generate_series(1, 3) g
         UNION ALL SELECT 4, 'stray', 'acme', 'k', 'chat', 'auto', 200, 1, timestamptz '2020-02-01 12:00:00+00'`,
        [],
      );
    } finally {
      await store.close();
    }
    // Creating and migrating a fresh embedded database, on a loaded machine.
  }, 120_000);

  it('--dry-run reports the partitions it would drop and the rows it would delete, and changes nothing', async () => {
    const r = await cli(['prune', '--dry-run'], env());
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^decision_traces: before \d{4}-\d{2}-\d{2}T[\d:.]+Z \(retention\.traces_days = 30\)$/);
    expect(lines.slice(1, 3)).toEqual([expect.stringMatching(/^  drop decision_traces_p20200101: 3 traces, \d+\.\d MiB$/), '  delete 1 rows of decision_traces_default']);
    expect(lines.slice(3)).toEqual([
      expect.stringMatching(/^feedback: before \S+ \(retention\.feedback_days = 30\)$/),
      '  nothing to prune',
      'experiment_events: kept (retention.lifecycle_events_days is null)',
      expect.stringMatching(/^rollups: before \S+ \(retention\.rollups_days = 400\)$/),
      '  nothing to prune',
      'dry run: nothing was changed',
    ]);
  });

  it('refuses a --before inside the learning window (exit 1, one line) and an unreadable one (exit 2), touching nothing', async () => {
    const inside = new Date(Date.now() - 10 * 86_400_000).toISOString().slice(0, 10);
    const r = await cli(['prune', '--before', inside], env());
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(new RegExp(`^gateway: --before ${inside}T00:00:00\\.000Z is inside the learning window \\(learning\\.window_days = 30\\): nothing after \\S+ may be pruned\\n$`));
    const bad = await cli(['prune', '--before', 'last tuesday'], env());
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('give a UTC day (YYYY-MM-DD)');
  });

  it('drops the partitions whole and deletes the stray traces (after the dry run and the refusals changed nothing); --before prunes up to the day given', async () => {
    // Still all there after the dry run and the refused commands above.
    expect(await left()).toEqual({ traces: 4, partition: true });
    const first = await cli(['prune', '--before', '2020-01-01'], env());
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toContain('decision_traces: before 2020-01-01T00:00:00.000Z (--before)\n  nothing to prune\n');
    const r = await cli(['prune'], env());
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.trimEnd().split('\n').pop()).toBe('pruned: 1 partitions dropped, 1 rows deleted');
    expect(await left()).toEqual({ traces: 0, partition: false });
  });
});

describeWithPostgres('gateway migrate / orgs / keys against real Postgres', () => {
  const PEPPER = 'cli-test-pepper-0123456789';
  const ORG_YAML = `
providers:
  mock: { family: mock }
models:
  mock-fast: { provider: mock, type: chat }
routes:
  - { name: default, models: [auto], targets: [mock/mock-fast] }
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
`;
  let db: TestDatabase;
  let env: Record<string, string>;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    // Empty, so `migrate` has work to do.
    db = await createTestDatabase({ migrated: false });
    env = {
      DATABASE_URL: db.url,
      GATEWAY_KEY_PEPPER: PEPPER,
      GATEWAY_CONFIG: file('acme.yaml', ORG_YAML),
      GATEWAY_DATA_DIR: mkdtempSync(join(tmp, 'pgdata-')),
    };
  });
  afterAll(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
    await db?.drop();
  });

  async function query<R>(sql: string): Promise<R[]> {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      return (await c.query(sql)).rows as R[];
    } finally {
      await c.end();
    }
  }

  async function app(): Promise<TestApp> {
    const t = await startTestApp({ yaml: ORG_YAML, env: { DATABASE_URL: db.url, GATEWAY_KEY_PEPPER: PEPPER }, controllers: [ProbeController] });
    apps.push(t);
    return t;
  }

  const probe = (t: TestApp, key: string) => fetch(`${t.url}/v1/probe/experiments`, { headers: { authorization: `Bearer ${key}` } });

  it('requires GATEWAY_KEY_PEPPER with DATABASE_URL', async () => {
    const r = await cli(['orgs', 'list'], { ...env, GATEWAY_KEY_PEPPER: '' });
    expect(r).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'gateway: config error: GATEWAY_KEY_PEPPER: is required when DATABASE_URL is set (replicas must hash API keys alike)\n',
    });
  });

  it('keys create for a configured organisation not yet in the database says to migrate first', async () => {
    const r = await cli(['keys', 'create', '--org', 'acme'], env);
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: 'gateway: organisation "acme" is in the config but not yet in the database: run "gateway migrate" (or start the server) first\n',
      ms: expect.any(Number),
    });
  });

  it('migrate applies the schema, upserts the configured organisations and exits 0; a second run changes nothing', async () => {
    const r = await cli(['migrate'], env);
    expect(r).toEqual({
      code: 0,
      stdout: 'migrations are up to date (postgres); 1 configured organizations upserted\n',
      stderr: '',
      ms: expect.any(Number),
    });
    const tables = await query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`);
    expect(tables.map((t) => t.table_name)).toEqual(expect.arrayContaining(['organizations', 'api_keys', 'experiments', 'decision_traces']));
    const snapshot = () =>
      query<{ s: string }>(
        `SELECT (SELECT json_agg(m ORDER BY m) FROM schema_migrations m)::text || (SELECT json_agg(json_build_array(o.id, o.plan, o.features, o.created_at) ORDER BY o.id) FROM organizations o)::text AS s`,
      );
    const before = await snapshot();
    expect((await cli(['migrate'], env)).code).toBe(0);
    expect(await snapshot()).toEqual(before);
  });

  it('orgs list shows the configured organisation', async () => {
    const r = await cli(['orgs', 'list'], env);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const rows = r.stdout.trim().split('\n').slice(1).map((l) => l.split('\t'));
    expect(rows).toEqual([['acme', 'pro', 'has_test_ab,feedback_routing,explain', 'unlimited', '-', '0', 'config']]);
  });

  it('keys create → the key authenticates on the app; revoke → a fresh app refuses it; stored only hashed', async () => {
    const created = await cli(['keys', 'create', '--org', 'acme', '--permissions', 'read', '--id', 'cli-read'], env);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const match = /^key id: cli-read\napi key \(shown once\): (gw-[A-Za-z0-9_-]{43})\n$/.exec(created.stdout);
    expect(match).not.toBeNull();
    const key = match![1];
    // Printed once: the key occurs a single time in the output.
    expect(created.stdout.split(key)).toHaveLength(2);

    // Never stored in plain: not in any column of any api_keys row.
    const rows = await query<{ id: string; row: string; key_hash: string; permissions: string[] }>(
      'SELECT id, key_hash, permissions, row_to_json(k)::text AS row FROM api_keys k',
    );
    expect(rows.map((r) => r.id)).toContain('cli-read');
    for (const r of rows) expect(r.row).not.toContain(key.slice(3));
    const stored = rows.find((r) => r.id === 'cli-read')!;
    expect(stored.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(stored.permissions).toEqual(['read']);

    const listed = await cli(['orgs', 'list'], env);
    expect(listed.stdout).toMatch(/^acme\t.*\t1\tconfig$/m);

    // A read key on a read route of the real app on the same database.
    const first = await app();
    const ok = await probe(first, key);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ org: 'acme' });
    // Read only: the same route family refuses writes.
    const write = await fetch(`${first.url}/v1/probe/experiments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-gateway-confirm': 'experiments' },
      body: '{}',
    });
    expect([write.status, ((await write.json()) as any).error.code]).toEqual([403, 'write_permission']);

    const revoked = await cli(['keys', 'revoke', 'cli-read'], env);
    expect(revoked).toEqual({ code: 0, stdout: 'revoked cli-read\n', stderr: '', ms: expect.any(Number) });
    const [row] = await query<{ revoked_at: Date | null }>(`SELECT revoked_at FROM api_keys WHERE id = 'cli-read'`);
    expect(row.revoked_at).not.toBeNull();

    // A new process-local key cache: the revocation is seen at once.
    const fresh = await app();
    const refused = await probe(fresh, key);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as any).error.code).toBe('invalid_api_key');

    const again = await cli(['keys', 'revoke', 'cli-read'], env);
    expect(again).toEqual({ code: 1, stdout: '', stderr: 'gateway: no active key with id "cli-read"\n', ms: expect.any(Number) });
  });

  it('keys create with a generated id and the default permissions', async () => {
    const r = await cli(['keys', 'create', '--org', 'acme'], env);
    expect(r.code).toBe(0);
    const id = /^key id: (\S+)$/m.exec(r.stdout)![1];
    const [row] = await query<{ permissions: string[]; source: string }>(`SELECT permissions, source FROM api_keys WHERE id = '${id.replace(/'/g, "''")}'`);
    expect(row).toEqual({ permissions: ['read', 'write'], source: 'cli' });
  });

  it('keys create --permissions with admin; create and revoke each leave one audit row (actor cli, no acting key)', async () => {
    const r = await cli(['keys', 'create', '--org', 'acme', '--permissions', 'read,admin', '--id', 'cli-admin'], env);
    expect(r.code).toBe(0);
    const [row] = await query<{ permissions: string[] }>(`SELECT permissions FROM api_keys WHERE id = 'cli-admin'`);
    expect(row.permissions).toEqual(['read', 'admin']);
    expect((await cli(['keys', 'revoke', 'cli-admin'], env)).code).toBe(0);
    const audit = await query<{ action: string; actor: string; actor_key_id: string | null; org_id: string }>(
      `SELECT action, actor, actor_key_id, org_id FROM key_audit WHERE key_id = 'cli-admin' ORDER BY id`,
    );
    expect(audit).toEqual([
      { action: 'created', actor: 'cli', actor_key_id: null, org_id: 'acme' },
      { action: 'revoked', actor: 'cli', actor_key_id: null, org_id: 'acme' },
    ]);
  });

  it('keys create for an unknown organisation: exit 1, one line', async () => {
    const r = await cli(['keys', 'create', '--org', 'nope'], env);
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'gateway: No organisation "nope".\n', ms: expect.any(Number) });
  });

  it('keys create with a duplicate id: exit 1, one line, no key printed', async () => {
    const r = await cli(['keys', 'create', '--org', 'acme', '--id', 'dup-id'], env);
    expect(r.code).toBe(0);
    const dup = await cli(['keys', 'create', '--org', 'acme', '--id', 'dup-id'], env);
    expect(dup.code).toBe(1);
    expect(dup.stdout).toBe('');
    expect(dup.stderr).toMatch(/^gateway: failed: [^\n]*duplicate key[^\n]*\n$/);
  });

  it('bad --permissions or a missing --org is a usage error: exit 2, nothing created', async () => {
    const before = await query<{ n: string }>('SELECT count(*)::text AS n FROM api_keys');
    const bad = await cli(['keys', 'create', '--org', 'acme', '--permissions', 'superuser'], env);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toContain('permissions are a comma list of read, write, admin');
    expect((await cli(['keys', 'create'], env)).code).toBe(2);
    expect((await cli(['keys', 'create', '--org', 'acme', '--permissions', ''], env)).code).toBe(2);
    expect(await query<{ n: string }>('SELECT count(*)::text AS n FROM api_keys')).toEqual(before);
  });

  it('an unreachable DATABASE_URL fails with one line, exit 1', async () => {
    const r = await cli(['orgs', 'list'], { ...env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^gateway: [^\n]*cannot reach Postgres at 127\.0\.0\.1:1\/none[^\n]*\n$/);
  });
});
