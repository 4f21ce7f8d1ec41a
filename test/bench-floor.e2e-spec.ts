/**
 * The benchmark's reference proxies (bench/lib/floor-proxy.js), which the goals are read against
 * with `npm run bench -- --floor`, `bench:floor` and `bench:ab --floor`: each must pass every event
 * of a stream through, in order and whole, and answer non-streaming requests as the fake does. A
 * floor that dropped or merged events would look cheaper than any gateway can be. Times are never
 * asserted.
 */
import http from 'node:http';

// The bench's helpers are plain CommonJS scripts of the repository.
const procs = require('../bench/lib/procs');
const { streamOnce, chunkTimings } = require('../bench/lib/streams');
const { chatBody } = require('../bench/lib/workload');

jest.setTimeout(60_000);

describe.each(['express', 'nest', 'node'])('bench floor proxy (%s)', (kind) => {
  let fake: { port: number; stop: () => Promise<void> };
  let floor: { url: string; stop: () => Promise<void> };
  const agent = new http.Agent({ keepAlive: true });

  beforeAll(async () => {
    fake = await procs.startFake({ chunks: 20, delayMs: 2 });
    floor = await procs.startFloorProxy(kind, fake.port);
  });
  afterAll(async () => {
    agent.destroy();
    await floor?.stop();
    await fake?.stop();
  });

  it('streams every event of the upstream, in order, then [DONE]', async () => {
    const streams = [];
    for (let i = 0; i < 3; i++) {
      streams.push(await streamOnce({ url: floor.url, path: '/v1/chat/completions', body: chatBody('bench-delay', { stream: true }), headers: {}, agent }));
    }
    for (const s of streams) {
      expect(s).toMatchObject({ status: 200, done: true, error: undefined });
      expect(s.chunks).toHaveLength(20);
    }
    expect(chunkTimings(streams, 20)).toMatchObject({ chunks: 60, missing: 0 });
  });

  it('answers a non-streaming request with the upstream answer', async () => {
    const res = await fetch(`${floor.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody('bench-model') });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: { content: unknown } }[] };
    expect(body.choices[0].message.content).toEqual(expect.any(String));
  });
});
