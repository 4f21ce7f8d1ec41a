import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { UpstreamError } from '../upstream-error';
import { UpstreamHttp } from './upstream-http';

const TIMEOUTS = { connectMs: 1_000, firstTokenMs: 1_000, idleMs: 1_000, totalMs: 5_000 };

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
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
  });
  afterAll(async () => {
    client.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const read = async () => {
    const r = await client.send({
      poolKey: 'p', url, headers: {}, body: {}, signal: new AbortController().signal, timeouts: TIMEOUTS, maxBytes: 1 << 20, stream: false,
      statusError: (status) => new UpstreamError('status', `upstream answered ${status}`, { status }),
    });
    return UpstreamHttp.text(r.body);
  };

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
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
  });
  afterAll(async () => {
    client.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const open = (signal: AbortSignal) =>
    client.send({
      poolKey: 'pool', url, headers: {}, body: {}, signal, timeouts: TIMEOUTS, maxBytes: 1 << 20, stream: true,
      statusError: (status) => new UpstreamError('status', `upstream answered ${status}`, { status }),
    });
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
