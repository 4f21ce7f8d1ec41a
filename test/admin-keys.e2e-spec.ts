/**
 * Admin API, keys (docs/api.md "Admin API"): list, get, create (the key shown once), revoke, audit;
 * config-managed keys refused with 409; every change audited in its own transaction (a failed change
 * writes none); another organisation's keys are missing ones, byte for byte; "last used" batched; no
 * key or hash in any answer. On PGlite and on real Postgres + Redis.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SqlStore } from '../src/stores/sql/sql-store';
import { KeyUsageRecorder } from '../src/tenancy/key-usage.recorder';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, OTHER_RW_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const KEY_FIELDS = ['config_managed', 'created_at', 'id', 'last_used_at', 'limits', 'permissions', 'prefix', 'revoked', 'revoked_at', 'source'];

describeEachStore('Admin API: keys', (env) => {
  let t: TestApp;
  const sql = () => t.app.get(SqlStore);
  const auditRows = async (keyId: string) =>
    (await sql().query<{ action: string; actor: string; actor_key_id: string | null; org_id: string }>('SELECT action, actor, actor_key_id, org_id FROM key_audit WHERE key_id = $1 ORDER BY id', [keyId])).rows;
  const countKeys = async () => Number((await sql().query<{ n: string }>('SELECT count(*)::text AS n FROM api_keys')).rows[0].n);
  /** Every secret the test knows: no answer may contain one, nor a stored hash. */
  const secrets = new Set<string>([ADMIN_KEY, RW_KEY, OTHER_ADMIN_KEY, OTHER_RW_KEY]);
  const expectNoSecret = async (text: string) => {
    for (const s of secrets) expect(text).not.toContain(s);
    const hashes = (await sql().query<{ key_hash: string }>('SELECT key_hash FROM api_keys')).rows.map((r) => r.key_hash);
    for (const h of hashes) expect(text).not.toContain(h);
    expect(text).not.toContain('key_hash');
  };
  const create = async (body: unknown = { permissions: ['read'] }, key = ADMIN_KEY) => {
    const r = await http(t).post('/v1/admin/keys').set(auth(key)).send(body as object);
    if (r.status === 201) secrets.add(r.body.key);
    return r;
  };

  beforeAll(async () => {
    t = await startTestApp({ yaml: adminYaml(), env: env() });
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('access', () => {
    const routes: Array<[string, string]> = [
      ['get', '/v1/admin/keys'],
      ['get', '/v1/admin/keys/acme-rw'],
      ['get', '/v1/admin/keys/acme-rw/audit'],
      ['post', '/v1/admin/keys'],
      ['delete', '/v1/admin/keys/acme-rw'],
      ['post', '/v1/admin/keys/acme-rw/revoke'],
    ];

    it('401 without a valid key, then 403 admin_permission for a key without it, before any 400', async () => {
      for (const [method, path] of routes) {
        const none = await (http(t) as any)[method](`${path}?limit=0`).send('{');
        expect([path, none.status, none.body.error.code]).toEqual([path, 401, 'invalid_api_key']);
        const bad = await (http(t) as any)[method](`${path}?limit=0`).set(auth('gw-nope')).send('{');
        expect(bad.text).toBe(none.text);
        const rw = await (http(t) as any)[method](`${path}?limit=0`).set(auth(RW_KEY)).set('content-type', 'application/json').send('{');
        expect([path, rw.status, rw.body.error]).toEqual([path, 403, { type: 'error', code: 'admin_permission', message: 'This API key lacks the admin permission.' }]);
      }
      // Nothing changed.
      expect((await http(t).get('/v1/models').set(auth(RW_KEY))).status).toBe(200);
      expect(await auditRows('acme-rw')).toEqual([]);
    });
  });

  describe('list and get', () => {
    it('the organisation\'s keys only, config-managed ones marked, no key or hash', async () => {
      const r = await http(t).get('/v1/admin/keys').set(auth(ADMIN_KEY));
      expect(r.status).toBe(200);
      expect(r.body.next_cursor).toBeNull();
      const ids = r.body.data.map((k: any) => k.id);
      expect(ids).toEqual(expect.arrayContaining(['acme-admin', 'acme-rw']));
      expect(ids).not.toContain('other-admin');
      const admin = r.body.data.find((k: any) => k.id === 'acme-admin');
      expect(Object.keys(admin).sort()).toEqual(KEY_FIELDS);
      expect(admin).toMatchObject({
        permissions: ['read', 'write', 'admin'],
        source: 'config',
        config_managed: true,
        revoked: false,
        revoked_at: null,
        limits: null,
        prefix: ADMIN_KEY.slice(0, 7),
        created_at: expect.stringMatching(ISO_UTC),
      });
      await expectNoSecret(r.text);

      const one = await http(t).get('/v1/admin/keys/acme-rw').set(auth(ADMIN_KEY));
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ id: 'acme-rw', permissions: ['read', 'write'], config_managed: true });
      await expectNoSecret(one.text);
    });

    it('another organisation\'s key, a missing id and an overlong id are byte-identical 404s', async () => {
      const answers = [];
      for (const path of ['/v1/admin/keys/other-admin', '/v1/admin/keys/nope', `/v1/admin/keys/${'x'.repeat(300)}`, '/v1/admin/keys/other-rw/audit', '/v1/admin/keys/__proto__']) {
        const r = await http(t).get(path).set(auth(ADMIN_KEY));
        answers.push([r.status, r.text]);
      }
      for (const [method, path] of [['delete', '/v1/admin/keys/other-rw'], ['post', '/v1/admin/keys/other-rw/revoke'], ['delete', '/v1/admin/keys/nope']] as const) {
        const r = await (http(t) as any)[method](path).set(auth(ADMIN_KEY));
        answers.push([r.status, r.text]);
      }
      expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1);
      expect(answers[0][0]).toBe(404);
      expect(JSON.parse(answers[0][1] as string)).toEqual({ error: { type: 'error', code: 'not_found', message: 'No key with this id in the organisation.' } });
      // The other organisation's key is untouched and still works.
      expect((await http(t).get('/v1/models').set(auth(OTHER_RW_KEY))).status).toBe(200);
      expect(await auditRows('other-rw')).toEqual([]);
    });

    it('pages newest first with an opaque cursor; next_cursor null at the end; filter on revoked', async () => {
      const made: string[] = [];
      for (let i = 0; i < 5; i++) made.push((await create()).body.id);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r: any = await http(t)
          .get('/v1/admin/keys')
          .query(cursor ? { limit: 2, cursor } : { limit: 2 })
          .set(auth(ADMIN_KEY));
        expect(r.status).toBe(200);
        expect(r.body.data.length).toBeLessThanOrEqual(2);
        seen.push(...r.body.data.map((k: any) => k.id));
        cursor = r.body.next_cursor;
        pages++;
      } while (cursor && pages < 50);
      expect(cursor).toBeNull();
      expect(new Set(seen).size).toBe(seen.length);
      const all = (await http(t).get('/v1/admin/keys').query({ limit: 1000 }).set(auth(ADMIN_KEY))).body.data.map((k: any) => k.id);
      expect(seen).toEqual(all);
      // Newest first: the keys made last come first.
      expect(all.slice(0, 5)).toEqual([...made].reverse());

      const first = await http(t).get('/v1/admin/keys').query({ limit: 1 }).set(auth(ADMIN_KEY));
      const c = first.body.next_cursor as string;
      expect(typeof c).toBe('string');
      // A cursor of other filters, or not a cursor at all: 400 naming it.
      for (const q of [{ cursor: c, revoked: 'true' }, { cursor: 'not-a-cursor' }, { cursor: Buffer.from('{"s":"x","k":[]}').toString('base64url') }]) {
        const r = await http(t).get('/v1/admin/keys').query(q).set(auth(ADMIN_KEY));
        expect([r.status, r.body.error.code, r.body.error.param]).toEqual([400, 'invalid_request', 'cursor']);
      }
      // Another organisation cannot use it to read this one's keys.
      const foreign = await http(t).get('/v1/admin/keys').query({ cursor: c }).set(auth(OTHER_ADMIN_KEY));
      expect([foreign.status, foreign.body.error.param]).toEqual([400, 'cursor']);

      const active = (await http(t).get('/v1/admin/keys').query({ revoked: 'false', limit: 1000 }).set(auth(ADMIN_KEY))).body.data;
      expect(active.every((k: any) => k.revoked === false)).toBe(true);
    });

    it('bad query parameters are 400 invalid_request naming the parameter', async () => {
      const cases: Array<[Record<string, string> | string, string]> = [
        [{ limit: '0' }, 'limit'],
        [{ limit: '1001' }, 'limit'],
        [{ limit: 'ten' }, 'limit'],
        [{ limit: '1.5' }, 'limit'],
        [{ revoked: 'yes' }, 'revoked'],
        [{ sort: 'id' }, 'sort'],
        ['limit=1&limit=2', 'limit'],
        ['__proto__=1', '__proto__'],
      ];
      for (const [q, param] of cases) {
        const r = await http(t).get('/v1/admin/keys').query(q).set(auth(ADMIN_KEY));
        expect([q, r.status, r.body.error?.code, r.body.error?.param]).toEqual([q, 400, 'invalid_request', param]);
      }
      const one = await http(t).get('/v1/admin/keys/acme-rw').query({ limit: '5' }).set(auth(ADMIN_KEY));
      expect([one.status, one.body.error.param]).toEqual([400, 'limit']);
    });
  });

  describe('create', () => {
    it('201 with the key shown once; it authenticates with exactly its permissions; audited with the acting key', async () => {
      const before = await countKeys();
      const r = await create({ permissions: ['read', 'admin'] });
      expect(r.status).toBe(201);
      expect(Object.keys(r.body).sort()).toEqual([...KEY_FIELDS, 'key'].sort());
      expect(r.body).toMatchObject({ permissions: ['read', 'admin'], source: 'api', config_managed: false, revoked: false, last_used_at: null, limits: null });
      expect(r.body.key).toMatch(/^gw-[A-Za-z0-9_-]{43}$/);
      expect(r.body.prefix).toBe(r.body.key.slice(0, 7));
      expect(await countKeys()).toBe(before + 1);
      expect(await auditRows(r.body.id)).toEqual([{ action: 'created', actor: 'api', actor_key_id: 'acme-admin', org_id: 'acme' }]);

      // The key works, is the organisation's, and is never shown again.
      const list = await http(t).get('/v1/admin/keys').set(auth(r.body.key));
      expect(list.status).toBe(200);
      expect(list.text).not.toContain(r.body.key);
      expect(list.body.data.map((k: any) => k.id)).toContain(r.body.id);
      const again = await http(t).get(`/v1/admin/keys/${r.body.id}`).set(auth(ADMIN_KEY));
      expect(again.body.key).toBeUndefined();
      await expectNoSecret(again.text);
      // Only its hash is stored.
      const stored = (await sql().query<{ t: string }>('SELECT row_to_json(k)::text AS t FROM api_keys k WHERE id = $1', [r.body.id])).rows[0].t;
      expect(stored).not.toContain(r.body.key.slice(3));
      expect(stored).toContain(createHmac('sha256', t.config.env.keyPepper?.reveal() ?? readPepper(t)).update(r.body.key).digest('hex'));
    });

    it('default permissions read and write', async () => {
      const r = await create({});
      expect(r.status).toBe(201);
      expect(r.body.permissions).toEqual(['read', 'write']);
      const denied = await http(t).get('/v1/admin/keys').set(auth(r.body.key));
      expect([denied.status, denied.body.error.code]).toEqual([403, 'admin_permission']);
    });

    it('a bad body is 400 invalid_body naming the field; nothing is created or audited', async () => {
      const before = await countKeys();
      const auditBefore = Number((await sql().query<{ n: string }>('SELECT count(*)::text AS n FROM key_audit')).rows[0].n);
      const cases: Array<[unknown, string | undefined]> = [
        [{ permissions: ['root'] }, 'permissions'],
        [{ permissions: [] }, 'permissions'],
        [{ permissions: 'read' }, 'permissions'],
        [{ permissions: ['read', 'read'] }, 'permissions'],
        [{ permissions: ['read'], id: 'mine' }, 'id'],
        [{ permissions: ['read'], __proto__x: 1 }, '__proto__x'],
      ];
      for (const [body, param] of cases) {
        const r = await create(body);
        expect([body, r.status, r.body.error.code, r.body.error.param]).toEqual([body, 400, 'invalid_body', param]);
      }
      for (const raw of ['{', '[]', '"x"', '{"__proto__":{"admin":true}}']) {
        const r = await http(t).post('/v1/admin/keys').set(auth(ADMIN_KEY)).set('content-type', 'application/json').send(raw);
        expect([raw, r.status, r.body.error.code]).toEqual([raw, 400, 'invalid_body']);
      }
      const big = await http(t).post('/v1/admin/keys').set(auth(ADMIN_KEY)).set('content-type', 'application/json').send(`{"permissions":["read"]${' '.repeat(9000)}}`);
      expect([big.status, big.body.error.code]).toEqual([400, 'body_too_large']);
      expect(await countKeys()).toBe(before);
      expect(Number((await sql().query<{ n: string }>('SELECT count(*)::text AS n FROM key_audit')).rows[0].n)).toBe(auditBefore);
    });
  });

  describe('revoke', () => {
    it('DELETE revokes at once, audited; a repeat changes nothing and writes no row; POST …/revoke the same', async () => {
      const made = await create({ permissions: ['read'] });
      expect((await http(t).get('/v1/models').set(auth(made.body.key))).status).toBe(200);
      const r = await http(t).delete(`/v1/admin/keys/${made.body.id}`).set(auth(ADMIN_KEY));
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: made.body.id, revoked: true, revoked_at: expect.stringMatching(ISO_UTC) });
      expect(r.body.key).toBeUndefined();
      // This replica forgets it at once; the cache store holds a tombstone for the others.
      const refused = await http(t).get('/v1/models').set(auth(made.body.key));
      expect([refused.status, refused.body.error.code]).toEqual([401, 'invalid_api_key']);
      expect(await auditRows(made.body.id)).toEqual([
        { action: 'created', actor: 'api', actor_key_id: 'acme-admin', org_id: 'acme' },
        { action: 'revoked', actor: 'api', actor_key_id: 'acme-admin', org_id: 'acme' },
      ]);
      const again = await http(t).post(`/v1/admin/keys/${made.body.id}/revoke`).set(auth(ADMIN_KEY));
      expect(again.status).toBe(200);
      expect(again.body.revoked_at).toBe(r.body.revoked_at);
      expect(await auditRows(made.body.id)).toHaveLength(2);

      const other = await create({ permissions: ['write'] });
      const viaPost = await http(t).post(`/v1/admin/keys/${other.body.id}/revoke`).set(auth(ADMIN_KEY));
      expect([viaPost.status, viaPost.body.revoked]).toEqual([200, true]);

      const audit = await http(t).get(`/v1/admin/keys/${made.body.id}/audit`).set(auth(ADMIN_KEY));
      expect(audit.status).toBe(200);
      expect(audit.body.data.map((a: any) => [a.action, a.actor, a.actor_key_id])).toEqual([
        ['created', 'api', 'acme-admin'],
        ['revoked', 'api', 'acme-admin'],
      ]);
      const paged = await http(t).get(`/v1/admin/keys/${made.body.id}/audit`).query({ limit: 1 }).set(auth(ADMIN_KEY));
      const rest = await http(t).get(`/v1/admin/keys/${made.body.id}/audit`).query({ limit: 1, cursor: paged.body.next_cursor }).set(auth(ADMIN_KEY));
      expect([...paged.body.data, ...rest.body.data].map((a: any) => a.action)).toEqual(['created', 'revoked']);
      expect(rest.body.next_cursor).toBeNull();
    });

    it('a key from gateway.yaml is 409 config_managed_key, unchanged and unaudited', async () => {
      for (const r of [await http(t).delete('/v1/admin/keys/acme-rw').set(auth(ADMIN_KEY)), await http(t).post('/v1/admin/keys/acme-rw/revoke').set(auth(ADMIN_KEY))]) {
        expect([r.status, r.body.error]).toEqual([
          409,
          { type: 'error', code: 'config_managed_key', message: 'This key is managed by gateway.yaml and cannot be changed through the API.' },
        ]);
      }
      expect((await http(t).get('/v1/models').set(auth(RW_KEY))).status).toBe(200);
      expect(await auditRows('acme-rw')).toEqual([]);
    });
  });

  describe('audit in the same transaction', () => {
    afterEach(async () => {
      await sql().query('DROP TRIGGER IF EXISTS refuse_audit ON key_audit');
    });

    it('when the audit row cannot be written, the change is not made either (503, nothing stored)', async () => {
      const kept = await create({ permissions: ['read'] });
      await sql().query(`CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
      await sql().query('CREATE TRIGGER refuse_audit BEFORE INSERT ON key_audit FOR EACH ROW EXECUTE FUNCTION refuse_audit()');
      const before = await countKeys();

      const made = await create({ permissions: ['read'] });
      expect([made.status, made.body.error.code]).toEqual([503, 'internal']);
      expect(made.text).not.toContain('audit refused');
      expect(await countKeys()).toBe(before);

      const revoke = await http(t).delete(`/v1/admin/keys/${kept.body.id}`).set(auth(ADMIN_KEY));
      expect([revoke.status, revoke.body.error.code]).toEqual([503, 'internal']);
      const row = (await sql().query<{ revoked_at: Date | null }>('SELECT revoked_at FROM api_keys WHERE id = $1', [kept.body.id])).rows[0];
      expect(row.revoked_at).toBeNull();
      expect((await http(t).get('/v1/models').set(auth(kept.body.key))).status).toBe(200);
      expect(await auditRows(kept.body.id)).toEqual([{ action: 'created', actor: 'api', actor_key_id: 'acme-admin', org_id: 'acme' }]);
    });
  });

  describe('last used', () => {
    it('is written in batches, not per request: null until a flush, then the time of the last use', async () => {
      const made = await create({ permissions: ['read'] });
      const recorder = t.app.get(KeyUsageRecorder);
      await recorder.run();
      const before = Date.now();
      expect((await http(t).get('/v1/models').set(auth(made.body.key))).status).toBe(200);
      expect((await http(t).get(`/v1/admin/keys/${made.body.id}`).set(auth(ADMIN_KEY))).body.last_used_at).toBeNull();
      await recorder.run();
      const used = (await http(t).get(`/v1/admin/keys/${made.body.id}`).set(auth(ADMIN_KEY))).body.last_used_at;
      expect(Date.parse(used)).toBeGreaterThanOrEqual(before - 1_000);
      expect(Date.parse(used)).toBeLessThanOrEqual(Date.now() + 1_000);
    });
  });
});

describe('Admin API: the demo key', () => {
  it('the embedded demo organisation\'s key holds admin and lists its keys', async () => {
    const t = await startTestApp({ yaml: 'providers:\n  mock: { family: mock }\nmodels:\n  mock-fast: { provider: mock, type: chat }\n' });
    try {
      expect(t.demoKey).toBeDefined();
      const r = await http(t).get('/v1/admin/keys').set(auth(t.demoKey!));
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual([expect.objectContaining({ id: 'demo-key', permissions: ['read', 'write', 'admin'], source: 'demo', config_managed: false })]);
      expect(r.text).not.toContain(t.demoKey);
      const audit = await http(t).get('/v1/admin/keys/demo-key/audit').set(auth(t.demoKey!));
      expect(audit.body.data.map((a: any) => [a.action, a.actor, a.actor_key_id])).toEqual([['created', 'system', null]]);
    } finally {
      await t.close();
    }
  });
});

/** The embedded pepper, generated into the data dir (no GATEWAY_KEY_PEPPER on PGlite). */
function readPepper(t: TestApp): string {
  return readFileSync(join(t.config.env.dataDir, 'key-pepper'), 'utf8').trim();
}
