import type { Express, Request, Response } from 'express';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GatewayExpressAdapter, madeWithPrototype } from './express-messages';

/** The adapter's server with one Express route, listening on loopback; what the server made is recorded before Express sees it. */
async function serve(options: Parameters<GatewayExpressAdapter['initHttpServer']>[0] = {}) {
  const adapter = new GatewayExpressAdapter();
  adapter.initHttpServer(options);
  const app = adapter.getInstance<Express>();
  app.disable('x-powered-by');
  app.post('/echo', (req: Request, res: Response) => {
    res.status(201).set('x-seen', req.get('x-given') ?? '').json({ isIncoming: req instanceof http.IncomingMessage });
  });
  const server = adapter.getHttpServer() as http.Server;
  const made: { req: object; res: object }[] = [];
  server.prependListener('request', (req, res) => made.push({ req: Object.getPrototypeOf(req), res: Object.getPrototypeOf(res) }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { app, server, made, url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('GatewayExpressAdapter', () => {
  it("makes each request and response with Express's prototypes, so Express's per-request setPrototypeOf changes nothing", async () => {
    const s = await serve();
    try {
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${s.url}/echo`, { method: 'POST', headers: { 'x-given': `v${i}` }, body: '{}' });
        expect(res.status).toBe(201);
        expect(res.headers.get('x-seen')).toBe(`v${i}`);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(await res.json()).toEqual({ isIncoming: true });
      }
      expect(s.made).toHaveLength(3);
      for (const m of s.made) {
        expect(m.req).toBe(s.app.request);
        expect(m.res).toBe(s.app.response);
      }
    } finally {
      await s.close();
    }
  });

  it("keeps Nest's own server (Node's classes) with forceCloseConnections", async () => {
    const s = await serve({ forceCloseConnections: true });
    try {
      const res = await fetch(`${s.url}/echo`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(201);
      expect(s.made[0]!.req).toBe(http.IncomingMessage.prototype);
      expect(s.made[0]!.res).toBe(http.ServerResponse.prototype);
    } finally {
      await s.close();
    }
  });

  it('leaves an ES class alone (it cannot be called on an object it did not make)', () => {
    class Made {}
    function Plain(this: { made?: boolean }) {
      this.made = true;
    }
    const proto = { kind: 'proto' };
    expect(madeWithPrototype(Made, proto)).toBeUndefined();
    const C = madeWithPrototype(Plain as unknown as new () => object, proto)!;
    const o = new C() as { made?: boolean };
    expect(Object.getPrototypeOf(o)).toBe(proto);
    expect(o.made).toBe(true);
  });
});
