import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { StoreTimeoutError, withTimeout } from './with-timeout';

/** Blocks this process's event loop, as a long garbage collection or a starved CPU does. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // busy
  }
}

describe('withTimeout', () => {
  // The echo server runs in another process: it answers while this one is stalled.
  let echo: ChildProcess;
  let port: number;
  beforeAll(async () => {
    echo = spawn(process.execPath, ['-e', "const s=require('net').createServer(c=>c.on('data',d=>c.write(d))).listen(0,'127.0.0.1',()=>console.log(s.address().port))"], { stdio: ['ignore', 'pipe', 'inherit'] });
    port = Number(await new Promise<string>((r) => echo.stdout!.once('data', (d) => r(String(d)))));
  });
  afterAll(() => {
    echo.kill();
  });

  it('rejects with StoreTimeoutError when nothing answers', async () => {
    await expect(withTimeout(new Promise(() => undefined), 20, 'redis get')).rejects.toThrow(new StoreTimeoutError('redis get', 20));
  });

  it('resolves when the answer is in the socket but this process stalled past the timeout before reading it', async () => {
    const socket: Socket = connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    try {
      const answer = new Promise<string>((resolve) => socket.once('data', (d) => resolve(String(d))));
      const bounded = withTimeout(answer, 30, 'echo');
      socket.write('pong');
      // The echo arrives within a millisecond; the loop is blocked far past the 30 ms timer.
      stall(150);
      await expect(bounded).resolves.toBe('pong');
    } finally {
      socket.destroy();
    }
  });
});
