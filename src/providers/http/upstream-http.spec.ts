import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { UpstreamError } from '../upstream-error';
import { UpstreamHttp, UpstreamRequest } from './upstream-http';

const TIMEOUTS = { connectMs: 1_000, firstTokenMs: 1_000, idleMs: 1_000, totalMs: 5_000 };

/** Listens on loopback; resolves the server's chat completions URL. */
async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
}

/** A JSON request to `url` (fields of `over` replace the defaults). */
function request(url: string, over: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    poolKey: 'p', url, headers: {}, body: {}, signal: new AbortController().signal, timeouts: TIMEOUTS, maxBytes: 1 << 20, stream: false,
    statusError: (status) => new UpstreamError('status', `upstream answered ${status}`, { status }),
    ...over,
  };
}

/** Ends a test server and its connections (and the client's pools, when given). */
async function close(server: http.Server, client?: UpstreamHttp): Promise<void> {
  client?.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** The whole answer's text. */
const textOf = async (client: UpstreamHttp, req: UpstreamRequest) => (await client.send(req)).text();

describe('UpstreamHttp content-encoding', () => {
  let server: http.Server;
  let url: string;
  let encoding: string;
  let payload: Buffer;
  const client = new UpstreamHttp();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': encoding, 'content-length': payload.length });
      res.end(payload);
    });
    url = await listen(server);
  });
  afterAll(async () => {
    client.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const read = () => textOf(client, request(url));

  it('decodes a gzip answer', async () => {
    encoding = 'gzip';
    payload = zlib.gzipSync('{"ok":true}');
    expect(await read()).toBe('{"ok":true}');
  });

  it.each(['constructor', '__proto__', 'zstd'])('reads an answer whose encoding is %s (not a decoder it has) as it came', async (name) => {
    encoding = name;
    payload = Buffer.from('{"ok":true}');
    expect(await read()).toBe('{"ok":true}');
  });
});

describe('UpstreamHttp whole answers', () => {
  it('an answer cut before its declared length is a network error, and the connection is not reused', async () => {
    let connections = 0;
    let cut = true;
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 100 });
      if (!cut) return void res.end(`{"ok":true}${' '.repeat(89)}`);
      res.write('{"ok":');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    server.on('connection', () => connections++);
    const url = await listen(server);
    const client = new UpstreamHttp();
    try {
      await expect(textOf(client, request(url))).rejects.toMatchObject({ kind: 'network' });
      cut = false;
      expect((await textOf(client, request(url))).trim()).toBe('{"ok":true}');
      expect(connections).toBe(2);
    } finally {
      await close(server, client);
    }
  });

  it('an answer that stalls hits the total timeout, and one over the size cap is a protocol error', async () => {
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.url?.endsWith('-big')) return void res.end('x'.repeat(4096));
      res.write('{"ok":');
    });
    const url = await listen(server);
    const client = new UpstreamHttp();
    try {
      await expect(textOf(client, request(url, { timeouts: { ...TIMEOUTS, totalMs: 100 } }))).rejects.toMatchObject({ kind: 'timeout' });
      await expect(textOf(client, request(`${url}-big`, { maxBytes: 1024 }))).rejects.toMatchObject({ kind: 'protocol' });
    } finally {
      await close(server, client);
    }
  });
});

describe('UpstreamHttp streams and the keep-alive pool', () => {
  let server: http.Server;
  let url: string;
  let connections = 0;
  /** After `[DONE]`: nothing more (a conforming upstream), or more bytes for a while (one that keeps sending). */
  let after: 'end' | 'more' = 'end';
  const client = new UpstreamHttp();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n');
      if (after === 'end') {
        res.end('data: [DONE]\n\n');
        return;
      }
      res.write('data: [DONE]\n\n');
      const more = setInterval(() => res.write(': still here\n\n'.repeat(2_000)), 5);
      res.on('close', () => clearInterval(more));
    });
    server.on('connection', () => connections++);
    url = await listen(server);
  });
  afterAll(() => close(server, client));

  const open = (signal: AbortSignal) => client.send(request(url, { poolKey: 'pool', signal, stream: true }));
  /** One stream, read until its `[DONE]` event and no further (as the OpenAI stream reader does). */
  const untilDone = async () => {
    const r = await open(new AbortController().signal);
    let text = '';
    for await (const chunk of r.body) {
      text += chunk.toString();
      if (text.includes('[DONE]')) break;
    }
    return text;
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
  /** The upstream's behaviour after `[DONE]` from now on, and its connection count from zero. */
  const reset = (mode: typeof after) => {
    after = mode;
    connections = 0;
  };

  it('a stream read up to its end marker gives its connection back: the next streams reuse it', async () => {
    reset('end');
    for (let i = 0; i < 5; i++) {
      expect(await untilDone()).toContain('[DONE]');
      await settle();
    }
    expect(connections).toBe(1);
  });

  it('an upstream that keeps sending after the end marker loses its connection (bounded read), and the pool opens a new one', async () => {
    reset('more');
    await untilDone();
    // RELEASE_BYTES is 64 KiB: the 28 KB writes every 5 ms pass it within a few writes.
    await new Promise((resolve) => setTimeout(resolve, 300));
    after = 'end';
    await untilDone();
    // The first stream took the pooled connection of the test above; the second needed a new one.
    expect(connections).toBe(1);
  });

  it('a client gone ends the connection at once, as before', async () => {
    reset('end');
    await untilDone();
    await settle();
    const gone = new AbortController();
    const r = await open(gone.signal);
    gone.abort();
    await expect((async () => { for await (const _ of r.body) void _; })()).rejects.toBeDefined();
    await settle();
    await untilDone();
    // The aborted stream's (pooled) connection was ended: the stream after it opened a new one.
    expect(connections).toBe(1);
  });
});

describe('UpstreamHttp and an upstream that closes idle connections', () => {
  let server: http.Server;
  let url: string;
  let connections = 0;
  /** Requests the server has seen on each connection. */
  const served = new WeakMap<object, number>();
  /** When true, a connection's second request meets the upstream closing it (a reset before any answer). */
  let resetSecond = false;
  const client = new UpstreamHttp(1_000);

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (resetSecond && n === 2) {
        req.socket.resetAndDestroy();
        return;
      }
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    // The upstream's own idle timer, announced as `Keep-Alive: timeout=3`.
    server.keepAliveTimeout = 3_000;
    server.on('connection', () => connections++);
    url = await listen(server);
  });
  afterAll(() => close(server, client));

  const call = () => textOf(client, request(url, { poolKey: 'idle' }));
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('a pooled connection the upstream closed as the request went out: the request is sent again on a new connection, once', async () => {
    resetSecond = true;
    connections = 0;
    await call();
    await sleep(20);
    // The second request goes out on the pooled connection, which the upstream resets.
    expect(await call()).toBe('{"ok":true}');
    expect(connections).toBe(2);
    resetSecond = false;
  });

  it('a reset on a new connection is the upstream failing: it is not repeated', async () => {
    const reject = http.createServer((req) => req.socket.resetAndDestroy());
    let attempts = 0;
    reject.on('connection', () => attempts++);
    const rejectUrl = await listen(reject);
    try {
      await expect(client.send(request(rejectUrl, { poolKey: 'reject' }))).rejects.toMatchObject({ kind: 'network' });
      expect(attempts).toBe(1);
    } finally {
      await close(reject);
    }
  });

  it('a connection left unused longer than the idle time is closed by the gateway, before the upstream closes it', async () => {
    await call();
    connections = 0;
    await sleep(300);
    await call();
    expect(connections).toBe(0); // within the idle time: the pooled connection serves
    await sleep(1_400);
    // Past the gateway's idle time (1 s here), still within the upstream's (3 s): a new connection.
    await call();
    expect(connections).toBe(1);
  });

  it('a request in flight is not cut by the idle time of the pool', async () => {
    const slow = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n');
      setTimeout(() => res.end('data: [DONE]\n\n'), 1_500);
    });
    const slowUrl = await listen(slow);
    try {
      expect(await textOf(client, request(slowUrl, { poolKey: 'slow', stream: true, timeouts: { ...TIMEOUTS, idleMs: 3_000 } }))).toContain('[DONE]');
    } finally {
      await close(slow);
    }
  });
});
