/**
 * GET /v1/admin/export (docs/operations.md "Decisions export", over HTTP): the caller organisation's
 * decision traces and experiment lifecycle events as NDJSON or CSV; the response header carries the
 * cursor the export ends at and the trailer confirms it with the row count; the next export from that
 * cursor has only what came since. Another organisation's rows never appear; a key without `admin`
 * is refused; bad parameters are 400 before anything is read. No request text anywhere. On PGlite and
 * on real Postgres + Redis.
 */
import { request as httpRequest } from 'node:http';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, OTHER_RW_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const PROMPT = 'the secret launch codes are 0000';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  trailers: Record<string, string | undefined>;
  body: string;
}

/** A GET read to its end with Node's client, which exposes the trailers. */
function get(base: string, path: string, key: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { headers: { authorization: `Bearer ${key}`, te: 'trailers' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => (body += s));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, trailers: res.trailers as Record<string, string>, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const lines = (body: string) => body.split('\n').filter(Boolean).map((l) => JSON.parse(l));

describeEachStore('Admin API: decisions export', (env) => {
  let t: TestApp;
  const chat = (key: string, requestId: string) =>
    http(t).post('/v1/chat/completions').set(auth(key)).set('x-request-id', requestId).send({ model: 'auto', messages: [{ role: 'user', content: PROMPT }] });

  beforeAll(async () => {
    t = await startTestApp({ yaml: adminYaml(), env: env() });
    for (const id of ['a-1', 'a-2', 'a-3']) expect((await chat(RW_KEY, id)).status).toBe(200);
    expect((await chat(OTHER_RW_KEY, 'o-1')).status).toBe(200);
    await t.app.get(DecisionTraceWriter).flush();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('streams the organisation\'s traces as NDJSON; the header\'s cursor is confirmed by the trailer; nothing of the request text', async () => {
    const r = await get(t.url, '/v1/admin/export?kind=traces', ADMIN_KEY);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/x-ndjson; charset=utf-8');
    expect(r.headers['export-schema-version']).toBe('1');
    const cursor = r.headers['export-cursor'];
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(r.trailers).toEqual({ 'export-cursor': cursor, 'export-rows': '3' });
    const rows = lines(r.body);
    expect(rows.map((x) => x.request_id).sort()).toEqual(['a-1', 'a-2', 'a-3']);
    expect(rows.every((x) => x.org_id === 'acme' && x.schema_version === 1 && x.status === 200 && x.selected_model === 'mock-fast')).toBe(true);
    expect(r.body).not.toContain('launch codes');

    // The other organisation sees its own only.
    const other = await get(t.url, '/v1/admin/export', OTHER_ADMIN_KEY);
    expect(lines(other.body).map((x) => x.request_id)).toEqual(['o-1']);

    // From the cursor: only what came since, then nothing.
    expect((await chat(RW_KEY, 'a-4')).status).toBe(200);
    expect((await chat(OTHER_RW_KEY, 'o-2')).status).toBe(200);
    await t.app.get(DecisionTraceWriter).flush();
    const next = await get(t.url, `/v1/admin/export?kind=traces&since=${cursor}`, ADMIN_KEY);
    expect(lines(next.body).map((x) => x.request_id)).toEqual(['a-4']);
    expect(next.trailers['export-rows']).toBe('1');
    const empty = await get(t.url, `/v1/admin/export?kind=traces&since=${next.headers['export-cursor']}`, ADMIN_KEY);
    expect(empty.status).toBe(200);
    expect(empty.body).toBe('');
    expect(empty.trailers).toEqual({ 'export-cursor': empty.headers['export-cursor'], 'export-rows': '0' });
  });

  it('CSV with its header line; experiment lifecycle events', async () => {
    const csv = await get(t.url, '/v1/admin/export?kind=traces&format=csv', ADMIN_KEY);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8; header=present');
    const [header, ...body] = csv.body.trim().split('\r\n');
    expect(header.split(',').slice(0, 4)).toEqual(['schema_version', 'id', 'created_at', 'org_id']);
    expect(body).toHaveLength(4);
    expect(body.every((l) => l.split(',')[3] === 'acme')).toBe(true);

    const created = await http(t)
      .post('/v1/experiments')
      .set(auth(RW_KEY))
      .set('x-gateway-confirm', 'experiments')
      .send({ type: 'canary', baseline: { provider: 'mock', model: 'mock-smart' }, candidate: { provider: 'mock', model: 'mock-fast' }, traffic_pct: 10 });
    expect(created.status).toBe(201);
    const events = await get(t.url, '/v1/admin/export?kind=events', ADMIN_KEY);
    expect(events.status).toBe(200);
    expect(lines(events.body).map((e) => [e.kind, e.experiment_id, e.org_id])).toEqual(expect.arrayContaining([['created', created.body.id, 'acme']]));
    expect(lines(events.body).every((e) => e.org_id === 'acme')).toBe(true);
    expect(lines((await get(t.url, '/v1/admin/export?kind=events', OTHER_ADMIN_KEY)).body)).toEqual([]);
  });

  it('admin permission only; bad parameters and another list\'s or organisation\'s cursor are 400', async () => {
    expect((await http(t).get('/v1/admin/export').set(auth(RW_KEY))).status).toBe(403);
    expect((await http(t).get('/v1/admin/export')).status).toBe(401);
    for (const [query, param] of [
      ['kind=feedback', 'kind'],
      ['format=parquet', 'format'],
      ['since=not-a-cursor', 'since'],
      ['limit=5', 'limit'],
    ]) {
      const r = await http(t).get(`/v1/admin/export?${query}`).set(auth(ADMIN_KEY));
      expect({ query, status: r.status, param: r.body.error?.param }).toEqual({ query, status: 400, param });
    }
    const theirs = (await get(t.url, '/v1/admin/export', OTHER_ADMIN_KEY)).headers['export-cursor'];
    const cross = await http(t).get(`/v1/admin/export?since=${theirs}`).set(auth(ADMIN_KEY));
    expect(cross.status).toBe(400);
    const events = (await get(t.url, '/v1/admin/export?kind=events', ADMIN_KEY)).headers['export-cursor'];
    expect((await http(t).get(`/v1/admin/export?kind=traces&since=${events}`).set(auth(ADMIN_KEY))).status).toBe(400);
  });
});
