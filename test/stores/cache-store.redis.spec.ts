import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { CacheStore } from '../../src/stores/cache/cache-store';
import { createCacheStore } from '../../src/stores/cache/cache-store.factory';
import { RedisCacheStore } from '../../src/stores/cache/redis-cache.store';
import { closedPort, memoryLogger, silentServer } from '../support/kit';
import { describeWithRedis, TEST_REDIS_URL } from '../support/real-servers';
import { cacheStoreContract } from './cache-store.contract';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** How long a call took to settle, and whether it rejected. */
async function timed(p: Promise<unknown>): Promise<{ ms: number; error?: unknown }> {
  const started = Date.now();
  try {
    await p;
    return { ms: Date.now() - started };
  } catch (error) {
    return { ms: Date.now() - started, error: error ?? new Error('rejected') };
  }
}

/** Polls until `fn` resolves, or fails after `ms`. */
async function eventually(fn: () => Promise<unknown>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      await fn();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

/**
 * docs/architecture.md "Degrade, never hang": a dead or silent Redis never hangs a call and never crashes the process. These need
 * no real server, so they run everywhere.
 */
describe('RedisCacheStore without a reachable server', () => {
  const opened: CacheStore[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
  });

  it('rejects get, set, hitWindows, incrementBelow and ping within the timeout on a closed port, logging once', async () => {
    const port = await closedPort();
    const { logger, lines } = memoryLogger('warn');
    const consoleError = jest.spyOn(console, 'error');
    const store = new RedisCacheStore({ url: `redis://127.0.0.1:${port}`, logger: logger.pino, maxReconnectDelayMs: 50 });
    opened.push(store);
    const calls = {
      get: store.get('k'),
      set: store.set('k', 'v', 1_000),
      hitWindows: store.hitWindows([{ key: 'rl:{org:x}:k', limit: 1, windowMs: 1_000 }]),
      incrementBelow: store.incrementBelow('ml:{org:x}', 1, 1_000),
      spend: store.spend([{ key: 'lim:{org:x}:rpm', limit: 1, windowMs: 1_000, cost: 1 }], []),
      ping: store.ping(1_000),
    };
    for (const [name, call] of Object.entries(calls)) {
      const r = await timed(call);
      expect([name, r.error]).toEqual([name, expect.any(Error)]);
      expect(r.ms).toBeLessThan(1_500);
    }
    // Reconnect attempts keep failing in the background; the process stays up and logs one line per interval.
    await sleep(300);
    const again = await timed(store.get('k'));
    expect(again.error).toBeInstanceOf(Error);
    expect(again.ms).toBeLessThan(1_500);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, topic: 'cache-store.redis' });
    expect(JSON.stringify(lines)).not.toContain('redis://');
    // ioredis prints "Unhandled error event" when nobody listens for errors.
    expect(consoleError).not.toHaveBeenCalled();
    consoleError.mockRestore();
  });

  it('rejects within the timeout when the server accepts connections but never answers', async () => {
    const silent = await silentServer();
    try {
      const store = new RedisCacheStore({ url: `redis://127.0.0.1:${silent.port}`, commandTimeoutMs: 300 });
      opened.push(store);
      for (const call of [store.get('k'), store.hitWindows([{ key: 'k', limit: 1, windowMs: 1_000 }]), store.ping(300)]) {
        const r = await timed(call);
        expect(r.error).toBeInstanceOf(Error);
        expect(r.ms).toBeLessThan(1_000);
      }
      const ping = await timed(store.ping(100));
      expect(ping.error).toBeInstanceOf(Error);
      expect(ping.ms).toBeLessThan(600);
    } finally {
      await silent.close();
    }
  });

  it('createCacheStore picks Redis for a REDIS_URL and starts even when it is down', async () => {
    const port = await closedPort();
    const store = createCacheStore({ redisUrl: `redis://127.0.0.1:${port}` });
    opened.push(store);
    expect(store).toBeInstanceOf(RedisCacheStore);
    expect(store.kind).toBe('redis');
    const r = await timed(store.ping(500));
    expect(r.error).toBeInstanceOf(Error);
    expect(r.ms).toBeLessThan(1_000);
  });
});

describeWithRedis('RedisCacheStore on a real server', () => {
  cacheStoreContract('redis', () => {
    const opened: RedisCacheStore[] = [];
    // A generous timeout: these tests are about semantics; the bounds are tested above.
    const open = () => {
      const s = new RedisCacheStore({ url: TEST_REDIS_URL!, commandTimeoutMs: 2_000 });
      opened.push(s);
      return s;
    };
    return {
      store: open(),
      peer: open,
      advance: sleep,
      exactTime: false,
      dispose: async () => void (await Promise.all(opened.map((s) => s.close()))),
    };
  });

  it('answers the first call made right after construction, before the connection is up', async () => {
    const store = new RedisCacheStore({ url: TEST_REDIS_URL! });
    try {
      const k = `test:{${randomUUID()}}:first`;
      await store.set(k, 'v', 10_000);
      expect(await store.get(k)).toBe('v');
    } finally {
      await store.close();
    }
  });

  describe('across a Redis restart', () => {
    let server: ChildProcess | undefined;
    let port: number;
    const redisServer = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();

    const start = async (): Promise<void> => {
      if (!redisServer) throw new Error('the restart test needs redis-server on PATH');
      server = spawn(redisServer, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    };
    const stop = async (): Promise<void> => {
      const child = server;
      server = undefined;
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    };
    afterAll(stop);

    it('fails fast while Redis is down and recovers, scripts included, once it is back', async () => {
      port = await closedPort();
      await start();
      const store = new RedisCacheStore({ url: `redis://127.0.0.1:${port}`, maxReconnectDelayMs: 100 });
      try {
        await eventually(() => store.ping(200), 5_000);
        const checks = [{ key: 'rl:{org:restart}:k', limit: 5, windowMs: 60_000 }];
        expect((await store.hitWindows(checks)).counts).toEqual([1]);
        expect(await store.incrementBelow('ml:{org:restart}', 5, 60_000)).toEqual({ allowed: true, value: 1 });

        await stop();
        const down = await timed(store.hitWindows(checks));
        expect(down.error).toBeInstanceOf(Error);
        expect(down.ms).toBeLessThan(1_000);

        await start();
        await eventually(() => store.ping(200), 5_000);
        // A fresh server has an empty script cache: EVALSHA falls back to EVAL on NOSCRIPT.
        expect((await store.hitWindows(checks)).counts).toEqual([1]);
        expect(await store.incrementBelow('ml:{org:restart}', 5, 60_000)).toEqual({ allowed: true, value: 1 });
        const spent = await store.spend([{ key: 'lim:{org:restart}:tpm', limit: 50, windowMs: 60_000, cost: 20 }], []);
        expect(spent).toMatchObject({ outcome: 'allowed', windows: [20] });
        await store.settle([{ key: 'lim:{org:restart}:tpm', hit: spent.hit!, from: 20, to: 5 }], []);
        expect((await store.spend([{ key: 'lim:{org:restart}:tpm', limit: 50, windowMs: 60_000, cost: 0 }], [])).windows).toEqual([5]);
      } finally {
        await store.close();
      }
    });
  });
});
