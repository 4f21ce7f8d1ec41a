import { AddressInfo, Socket, createServer } from 'node:net';
import { PassThrough } from 'node:stream';
import { createLogger } from './logger';
import { BatchedLineOutput, LineSink } from './batched-line-output';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Lines out right after their turn (any pending byte count reaches flushBytes), as the tests of the queue limits want them. */
const TURN = { flushBytes: 0 };

/** A sink that records each write and reports a queue of the given size. */
function recordingSink(queued = () => 0) {
  const writes: string[] = [];
  const sink: LineSink = {
    write: (chunk) => {
      writes.push(chunk);
      return true;
    },
    get writableLength() {
      return queued();
    },
  };
  return { sink, writes };
}

describe('BatchedLineOutput', () => {
  it('holds lines for the linger, then writes every line of it in one write, in order', async () => {
    const { sink, writes } = recordingSink();
    const out = new BatchedLineOutput(sink, { lingerMs: 60 });
    out.write('a\n');
    await nextTurn();
    out.write('b\n'); // a later turn, within the linger
    await sleep(10);
    out.write('c\n');
    expect(writes).toEqual([]);
    await sleep(100);
    expect(writes).toEqual(['a\nb\nc\n']);
    out.write('d\n'); // the next line starts the next linger
    expect(writes).toEqual(['a\nb\nc\n']);
    await sleep(100);
    expect(writes).toEqual(['a\nb\nc\n', 'd\n']);
  });

  it('writes right after the turn once flushBytes are pending, whatever the linger', async () => {
    const { sink, writes } = recordingSink();
    const out = new BatchedLineOutput(sink, { lingerMs: 60_000, flushBytes: 10 });
    out.write('12345\n');
    await nextTurn();
    expect(writes).toEqual([]);
    out.write('67890\n');
    out.write('x\n');
    await nextTurn();
    expect(writes).toEqual(['12345\n67890\nx\n']);
  });

  it('by default a line waits at most about 20 ms', async () => {
    const { sink, writes } = recordingSink();
    const out = new BatchedLineOutput(sink);
    out.write('soon\n');
    await nextTurn();
    expect(writes).toEqual([]);
    for (const deadline = Date.now() + 2_000; writes.length === 0 && Date.now() < deadline; ) await sleep(5);
    expect(writes).toEqual(['soon\n']);
  });

  it('with no linger, writes the lines of one event-loop turn in one write, in order, after the turn', async () => {
    const { sink, writes } = recordingSink();
    const out = new BatchedLineOutput(sink, TURN);
    out.write('a\n');
    out.write('b\n');
    out.write('c\n');
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual(['a\nb\nc\n']);
    out.write('d\n');
    await nextTurn();
    expect(writes).toEqual(['a\nb\nc\n', 'd\n']);
  });

  it('writes what is pending at once when flushed (process exit, logger.flush)', () => {
    const { sink, writes } = recordingSink();
    const out = new BatchedLineOutput(sink, { lingerMs: 60_000 });
    out.write('last words\n');
    const done = jest.fn();
    out.flush(done);
    expect(writes).toEqual(['last words\n']);
    expect(done).toHaveBeenCalledTimes(1);
  });

  it('drops lines while the sink holds too much, and reports how many once it has drained', async () => {
    let queued = 0;
    const { sink, writes } = recordingSink(() => queued);
    const out = new BatchedLineOutput(sink, { ...TURN, maxQueuedBytes: 100 });
    const reports: number[] = [];
    out.onDropped = (n) => reports.push(n);
    out.write('kept\n');
    queued = 100; // the reader stopped: the sink is full
    out.write('lost 1\n');
    out.write('lost 2\n');
    await nextTurn();
    expect(writes).toEqual(['kept\n']);
    expect(reports).toEqual([]); // still full: nothing to report yet
    queued = 0; // drained
    out.write('back\n');
    await nextTurn();
    expect(writes).toEqual(['kept\n', 'back\n']);
    expect(reports).toEqual([2]);
  });

  it('counts what is pending in the turn against the limit too', async () => {
    const { sink, writes } = recordingSink();
    const out = new BatchedLineOutput(sink, { ...TURN, maxQueuedBytes: 10 });
    out.write('12345\n');
    out.write('67890\n'); // 6 pending + 6 > 10
    await nextTurn();
    expect(writes).toEqual(['12345\n']);
  });

  it('is what the process logger writes through: pino lines, batched, onto a real stream', async () => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
    const out = new BatchedLineOutput(stream, { lingerMs: 30 });
    const logger = createLogger('info', out);
    logger.info({ n: 1 }, 'one');
    await nextTurn();
    logger.info({ n: 2 }, 'two');
    await sleep(80);
    expect(chunks).toHaveLength(1);
    const lines = chunks[0].trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines).toMatchObject([
      { level: 'info', service: 'gateway', n: 1, msg: 'one' },
      { level: 'info', service: 'gateway', n: 2, msg: 'two' },
    ]);
  });

  it('on a socket whose reader stopped: the queue stays within the limit, every line is either delivered or counted', async () => {
    const server = createServer();
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new Socket();
    await new Promise<void>((resolve) => client.connect((server.address() as AddressInfo).port, '127.0.0.1', resolve));
    const reader = await accepted;
    reader.pause(); // a frozen log collector: the kernel's buffers fill, then the socket's own queue
    try {
      const limit = 256 * 1024;
      const out = new BatchedLineOutput(client, { ...TURN, maxQueuedBytes: limit });
      let dropped = 0;
      out.onDropped = (n) => (dropped += n);
      const line = `${'x'.repeat(99)}\n`;
      const total = 200_000; // 20 MB: more than loopback's buffers hold
      let peak = 0;
      for (let i = 0; i < total; i++) {
        out.write(line);
        if (i % 500 === 499) {
          await nextTurn();
          peak = Math.max(peak, client.writableLength);
        }
      }
      await nextTurn();
      expect(peak).toBeLessThanOrEqual(limit);
      expect(client.writableLength).toBeGreaterThan(0); // the queue did fill: the limit was what held it

      let received = 0;
      reader.on('data', (c: Buffer) => {
        for (const b of c) if (b === 0x0a) received++;
      });
      reader.resume();
      while (client.writableLength > 0) await new Promise((r) => setTimeout(r, 10));
      out.write('after\n'); // writing again reports what was lost
      await nextTurn();
      expect(dropped).toBeGreaterThan(0);
      for (const deadline = Date.now() + 5_000; received + dropped < total + 1 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
      expect(received + dropped).toBe(total + 1);
    } finally {
      client.destroy();
      reader.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a sink that fails (its reader closed the pipe) is written no more, reported once, and does not crash the process', async () => {
    const { spawn } = await import('node:child_process');
    const { join } = await import('node:path');
    // A child logging through the process logger's destination into a pipe whose reader closes at
    // once: without an error listener on standard output, Node would end it with an unhandled EPIPE.
    const script = `
      const file = ${JSON.stringify(join(__dirname, 'batched-line-output.ts'))};
      const ts = require('typescript');
      const Module = require('node:module');
      const js = ts.transpileModule(require('node:fs').readFileSync(file, 'utf8'), { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2021 } }).outputText;
      const m = new Module(file);
      m._compile(js, file);
      const { BatchedLineOutput } = m.exports;
      const out = new BatchedLineOutput();
      let i = 0;
      const t = setInterval(() => {
        out.write('line ' + i++ + '\\n');
        if (i === 300) { clearInterval(t); process.stderr.write('still serving\\n'); }
      }, 1);
    `;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.destroy(); // the reader goes away
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(stderr).toContain('still serving');
    expect(stderr.match(/standard output failed \(EPIPE\)/g)).toHaveLength(1);
  });

  it("the process logger's last lines are written when the process ends on its own, the linger's timer not holding it", async () => {
    const { spawn } = await import('node:child_process');
    const { join } = await import('node:path');
    // The real logger module in a child that logs, then has nothing left to do.
    const script = `
      const ts = require('typescript');
      const fs = require('node:fs');
      require.extensions['.ts'] = (m, file) => m._compile(ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2021, esModuleInterop: true } }).outputText, file);
      const { createLogger } = require(${JSON.stringify(join(__dirname, 'logger.ts'))});
      const log = createLogger('info');
      log.info({ n: 1 }, 'first');
      setTimeout(() => log.info({ n: 2 }, 'last'), 5);
    `;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    expect(stdout.trimEnd().split('\n').map((l) => JSON.parse(l).msg)).toEqual(['first', 'last']);
  });

  it('reports a failing sink once and drops what follows', async () => {
    const stream = new PassThrough();
    const out = new BatchedLineOutput(stream, TURN);
    const failures: string[] = [];
    out.onBroken = (err) => failures.push(err.message);
    out.write('before\n');
    stream.emit('error', new Error('EPIPE'));
    stream.emit('error', new Error('EPIPE again'));
    out.write('after\n');
    await nextTurn();
    expect(failures).toEqual(['EPIPE']);
    expect(stream.read()).toBeNull();
  });

  it('the loggers of one process share standard output: one exit hook and one error listener, however many loggers', () => {
    const exits = process.listenerCount('exit');
    const errors = process.stdout.listenerCount('error');
    for (let i = 0; i < 20; i++) createLogger('silent');
    expect(process.listenerCount('exit') - exits).toBeLessThanOrEqual(1);
    expect(process.stdout.listenerCount('error') - errors).toBeLessThanOrEqual(1);
  });
});
