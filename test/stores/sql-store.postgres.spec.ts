import { loadEnv } from '../../src/config/env';
import { ANALYTICS_MIGRATIONS, readMigrations, type AppliedMigration } from '../../src/stores/sql/migrator';
import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { createSqlStore, StoreStartupError } from '../../src/stores/sql/sql-store.factory';
import { StoreTimeoutError } from '../../src/stores/with-timeout';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { closedPort, silentServer } from '../support/kit';
import { describeWithPostgres } from '../support/real-servers';
import { sqlStoreContract } from './sql-store.contract';

async function elapsed<T>(p: Promise<T>): Promise<{ ms: number; result: PromiseSettledResult<T> }> {
  const started = Date.now();
  const [result] = await Promise.allSettled([p]);
  return { ms: Date.now() - started, result };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeWithPostgres('SqlStore on a real Postgres', () => {
  sqlStoreContract('Postgres', async ({ migrated }) => {
    const db = await createTestDatabase({ migrated });
    const store = new PgSqlStore(db.url);
    const peers: PgSqlStore[] = [];
    return {
      store,
      peer: async () => {
        const peer = new PgSqlStore(db.url);
        peers.push(peer);
        return peer;
      },
      cleanup: async () => {
        await Promise.all([store, ...peers].map((s) => s.close()));
        await db.drop();
      },
    };
  });

  it('runs in UTC and without JIT on every pooled connection, whatever the server is configured with', async () => {
    const db = await createTestDatabase({ migrated: false });
    const store = new PgSqlStore(db.url, { max: 2 });
    try {
      // Two connections at once: the settings are each connection's, not one session's.
      const both = await Promise.all([0, 1].map(() => store.transaction(async (tx) => (await tx.query<{ tz: string; jit: string }>(`SELECT current_setting('TimeZone') AS tz, current_setting('jit') AS jit, pg_sleep(0.05)`, [])).rows[0])));
      expect(both).toEqual([expect.objectContaining({ tz: 'UTC', jit: 'off' }), expect.objectContaining({ tz: 'UTC', jit: 'off' })]);
      // The server's own default is on (Postgres 15), so the setting above is the store's doing.
      const { rows } = await store.query<{ boot: string | null }>(`SELECT boot_val AS boot FROM pg_settings WHERE name = 'jit'`, []);
      expect(rows[0].boot).toBe('on');
    } finally {
      await store.close();
      await db.drop();
    }
  });

  describe('when the server is dead, stalled or drops connections', () => {
    let db: TestDatabase;
    let admin: PgSqlStore;
    beforeAll(async () => {
      db = await createTestDatabase();
      admin = new PgSqlStore(db.url);
    });
    afterAll(async () => {
      await admin?.close();
      await db?.drop();
    });

    it('rejects ping and query at once when nothing listens on the port', async () => {
      const store = new PgSqlStore(`postgres://postgres@127.0.0.1:${await closedPort()}/gw`, { connectionTimeoutMs: 1_000 });
      try {
        const ping = await elapsed(store.ping(2_000));
        expect(ping.result.status).toBe('rejected');
        expect(ping.ms).toBeLessThan(1_500);
        await expect(store.query('SELECT 1', [])).rejects.toMatchObject({ code: 'ECONNREFUSED' });
        await expect(store.transaction(async () => 1)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      } finally {
        await store.close();
      }
    });

    it('rejects within the timeouts when the server accepts but never answers', async () => {
      const silent = await silentServer();
      const store = new PgSqlStore(`postgres://postgres@127.0.0.1:${silent.port}/gw`, { connectionTimeoutMs: 400 });
      try {
        const ping = await elapsed(store.ping(200));
        expect(ping.result).toMatchObject({ status: 'rejected', reason: expect.any(StoreTimeoutError) });
        expect(ping.ms).toBeLessThan(1_000);
        const query = await elapsed(store.query('SELECT 1', []));
        expect(query.result).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/timeout/i) } });
        expect(query.ms).toBeLessThan(1_500);
      } finally {
        await store.close();
        await silent.close();
      }
    });

    it('cancels a statement that runs past statement_timeout, and stays usable', async () => {
      const store = new PgSqlStore(db.url, { statementTimeoutMs: 200 });
      try {
        const slow = await elapsed(store.query('SELECT pg_sleep(5)', []));
        expect(slow.result).toMatchObject({ status: 'rejected', reason: { code: '57014' } });
        expect(slow.ms).toBeLessThan(2_000);
        await expect(store.query('SELECT 1 AS ok', [])).resolves.toMatchObject({ rows: [{ ok: 1 }] });
      } finally {
        await store.close();
      }
    });

    it('gives up on the client side (query_timeout) when the server does not answer in time', async () => {
      const store = new PgSqlStore(db.url, { statementTimeoutMs: 30_000, queryTimeoutMs: 300 });
      try {
        const slow = await elapsed(store.query('SELECT pg_sleep(3)', []));
        expect(slow.result).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/timeout/i) } });
        expect(slow.ms).toBeLessThan(2_000);
        await expect(store.query('SELECT 1 AS ok', [])).resolves.toMatchObject({ rows: [{ ok: 1 }] });
      } finally {
        await store.close();
      }
    });

    it('survives the server killing an idle pooled connection (no crash) and reconnects', async () => {
      const store = new PgSqlStore(db.url, { max: 1 });
      try {
        const { rows } = await store.query<{ pid: number }>('SELECT pg_backend_pid() AS pid', []);
        await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
        // The idle client now receives the termination and emits `error`; unhandled, that would end the process.
        await sleep(200);
        const again = await store.query<{ pid: number }>('SELECT pg_backend_pid() AS pid', []);
        expect(again.rows[0].pid).not.toBe(rows[0].pid);
      } finally {
        await store.close();
      }
    });

    it('fails a transaction whose connection is killed midway, without crashing, and stays usable', async () => {
      const store = new PgSqlStore(db.url, { max: 1 });
      try {
        await expect(
          store.transaction(async (tx) => {
            const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid', []);
            await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
            await sleep(200);
            await tx.query('SELECT 1', []);
          }),
        ).rejects.toThrow();
        // The broken connection was not returned to the pool (max 1): this would fail if it had been.
        await expect(store.query('SELECT 1 AS ok', [])).resolves.toMatchObject({ rows: [{ ok: 1 }] });
      } finally {
        await store.close();
      }
    });
  });

  describe('createSqlStore (DATABASE_URL)', () => {
    it('connects, migrates an empty database, and migrates nothing on the next start', async () => {
      const db = await createTestDatabase({ migrated: false });
      const env = loadEnv({ DATABASE_URL: db.url, GATEWAY_KEY_PEPPER: 'test-pepper' });
      try {
        let applied: AppliedMigration[] = [];
        const first = await createSqlStore(env, { onMigrated: (a) => (applied = a) });
        expect(first.kind).toBe('postgres');
        expect(applied.map((m) => m.version)).toEqual(readMigrations(ANALYTICS_MIGRATIONS.dir).map((m) => m.version));
        await first.close();
        const second = await createSqlStore(env, { onMigrated: (a) => (applied = a) });
        expect(applied).toEqual([]);
        await expect(second.ping(1_000)).resolves.toBeUndefined();
        await second.close();
      } finally {
        await db.drop();
      }
    });

    it('rejects quickly with one clear line naming the server, never its password, when Postgres is unreachable', async () => {
      const url = `postgres://gateway:hunter2@127.0.0.1:${await closedPort()}/analytics`;
      const started = Date.now();
      const err = await createSqlStore(loadEnv({ DATABASE_URL: url, GATEWAY_KEY_PEPPER: 'test-pepper' })).catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(err).toBeInstanceOf(StoreStartupError);
      const message = (err as Error).message;
      expect(message).toMatch(/^analytics store: cannot reach Postgres at 127\.0\.0\.1:\d+\/analytics \(DATABASE_URL\): .*ECONNREFUSED/);
      expect(message).not.toContain('hunter2');
      expect(message).not.toContain('\n');
    });
  });
});
