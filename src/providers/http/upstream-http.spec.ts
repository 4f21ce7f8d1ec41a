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
