import express from 'express';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import type { GatewayRequest } from './request-context';
import { respondSse, type SseEncoder } from './responder';

/**
 * respondSse on a real socket: what the server's first socket write holds. The stream is held until its first output,
 * so the headers leave with the first event in one write; an event that renders nothing still sends
 * the headers at once.
 */
const enc: SseEncoder<string> = {
  event: (e) => (e === '' ? undefined : `data: ${e}\n\n`),
  end: () => 'data: [DONE]\n\n',
  failed: () => 'event: error\ndata: {}\n\n',
  trailers: () => ({}),
};

/** What the server handed its socket, one entry per socket write (a corked batch is one). */
type Writes = string[];

function recordWrites(socket: net.Socket, writes: Writes): void {
  const s = socket as unknown as {
    _write(chunk: Buffer | string, enc: BufferEncoding, cb: (e?: Error) => void): void;
    _writev(chunks: Array<{ chunk: Buffer | string }>, cb: (e?: Error) => void): void;
  };
  const write = s._write.bind(s);
  const writev = s._writev.bind(s);
  s._write = (chunk, enc, cb) => (writes.push(String(chunk)), write(chunk, enc, cb));
  s._writev = (chunks, cb) => (writes.push(chunks.map((c) => String(c.chunk)).join('')), writev(chunks, cb));
}

async function firstRead(events: () => AsyncIterable<string>): Promise<{ first: string; all: string }> {
  const writes: Writes = [];
  const app = express();
  app.post('/s', (req, res) => {
    recordWrites(req.socket, writes);
    (req as unknown as GatewayRequest).facts = {} as GatewayRequest['facts'];
    void respondSse(req as unknown as GatewayRequest, res, { target: { provider: 'p', model: 'm' }, fallbackUsed: false }, events(), enc, [], new AbortController().signal);
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.setEncoding('latin1');
    socket.resume();
    socket.write('POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    await new Promise((r) => socket.once('end', r));
    return { first: writes[0], all: writes.join('') };
  } finally {
    server.close();
  }
}

describe('respondSse', () => {
  it('sends the headers and the first event in one write', async () => {
    const { first, all } = await firstRead(async function* () {
      yield 'one';
      await new Promise((r) => setTimeout(r, 50));
      yield 'two';
    });
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(first).toContain('Gateway-Provider: p\r\n');
    expect(first).toContain('data: one\n\n');
    expect(first).not.toContain('data: two');
    expect(all).toContain('data: two\n\n');
    expect(all).toContain('data: [DONE]\n\n');
  });

  it('sends the headers at once when the first event renders nothing', async () => {
    const { first, all } = await firstRead(async function* () {
      yield '';
      await new Promise((r) => setTimeout(r, 50));
      yield 'late';
    });
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n$/);
    expect(all).toContain('data: late\n\n');
  });
});
