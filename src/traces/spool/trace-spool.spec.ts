import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PgliteDirLockedError } from '../../stores/sql/pglite-dir-lock';
import type { DecisionTrace } from '../decision-trace';
import { encodeFrames, readFrame } from './journal-frame';
import { decodeTrace, encodeTrace } from './trace-codec';
import { TraceSpool, TraceSpoolOptions } from './trace-spool';

function trace(i: number, over: Partial<DecisionTrace> = {}): DecisionTrace {
  // Cast: a whole trace with its id, whichever fields the type lists today.
  return {
    id: 1_000 + i,
    requestId: `req-${i}`,
    orgId: 'acme',
    apiKeyId: 'acme-rw',
    sessionId: `s-${Math.floor(i / 4)}`,
    endpoint: 'chat',
    requestedModel: 'auto',
    route: 'default',
    strategy: 'ordered',
    candidates: [{ provider: 'openai', model: 'gpt-4o-mini', score: 0.5 }],
    selectedProvider: 'openai',
    selectedModel: 'gpt-4o-mini',
    fallbackUsed: false,
    attempts: 1,
    failedAttempts: null,
    experimentId: null,
    experimentArm: null,
    status: 200,
    errorCode: null,
    latencyMs: 12.5,
    ttftMs: null,
    promptTokens: 10,
    completionTokens: 20,
    reasoningTokens: null,
    costUsd: 0.0001,
    finishReason: 'stop',
    createdAt: new Date(Date.UTC(2025, 5, 15, 12, 0, 0, i)),
    ...over,
  } as DecisionTrace;
}

const ids = (ts: readonly DecisionTrace[]) => ts.map((t) => t.requestId);
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => trace(from + i));
const segments = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.seg')).sort();

/** Everything the spool gives back, committing each batch as the replayer does after the store took it. */
async function drain(spool: TraceSpool, max = 100): Promise<{ traces: DecisionTrace[]; damaged: number }> {
  const traces: DecisionTrace[] = [];
  let damaged = 0;
  for (let b = await spool.next(max); b; b = await spool.next(max)) {
    traces.push(...b.traces);
    damaged += b.damaged;
    await b.commit();
  }
  return { traces, damaged };
}

describe('trace spool framing', () => {
  it('reads back what it framed; a cut-short or altered record is not a record', () => {
    const payloads = [encodeTrace(trace(1)), encodeTrace(trace(2))];
    const buf = encodeFrames(payloads);
    const first = readFrame(buf, 0, buf.length);
    expect(first.kind).toBe('record');
    const second = first.kind === 'record' ? readFrame(buf, first.next, buf.length) : undefined;
    expect(second?.kind === 'record' && decodeTrace(second.payload).requestId).toBe('req-2');
    expect(readFrame(buf, 0, buf.length - payloads[1].length - 3).kind).toBe('record');
    expect(readFrame(buf, first.kind === 'record' ? first.next : 0, buf.length - 1).kind).toBe('short');
    const flipped = Buffer.from(buf);
    flipped[20] ^= 0x01;
    expect(readFrame(flipped, 0, flipped.length).kind).toBe('bad');
  });

  it('stores no more than the analytics store would: a failed attempt loses an upstream message, a Date comes back a Date', () => {
    const leaky = trace(1, {
      failedAttempts: [{ provider: 'openai', model: 'm', error: 'status', status: 503, detail: 'upstream said: secret' } as never],
      candidates: [{ provider: 'p', model: 'm', score: Number.NaN, note: 'text' } as never],
    });
    (leaky as unknown as Record<string, unknown>).extra = { body: 'prompt text' };
    const text = encodeTrace(leaky).toString('utf8');
    expect(text).not.toContain('secret');
    expect(text).not.toContain('prompt text');
    expect(text).not.toContain('note');
    const back = decodeTrace(encodeTrace(leaky));
    expect(back.failedAttempts).toEqual([{ provider: 'openai', model: 'm', error: 'status', status: 503 }]);
    expect(back.candidates).toEqual([{ provider: 'p', model: 'm', score: null }]);
    expect(back.createdAt).toEqual(leaky.createdAt);
    const plain = trace(2);
    // Optional lists the trace did not carry may come back as null: the repository stores both as NULL.
    const back2 = Object.fromEntries(Object.entries(decodeTrace(encodeTrace(plain))).filter(([k, v]) => v !== null || k in plain));
    expect(back2).toEqual(plain);
  });
});

describe('TraceSpool', () => {
  let root: string;
  const open: TraceSpool[] = [];
  const spoolAt = async (o: Partial<TraceSpoolOptions> = {}) => {
    const s = await TraceSpool.open({ dir: join(root, 'spool'), maxBytes: 64 << 20, ...o });
    open.push(s);
    return s;
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'gw-spool-'));
  });
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('gives the traces back in the order they were appended, across segments, and deletes each segment once committed', async () => {
    const spool = await spoolAt({ segmentBytes: 4_096 });
    for (let i = 0; i < 20; i++) expect(await spool.append(range(i * 10, 10))).toBe(true);
    const dir = join(root, 'spool');
    expect(segments(dir).length).toBeGreaterThan(5);
    expect(spool.bytes).toBe(segments(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0));
    const b = await spool.next(15);
    expect(ids(b!.traces)).toEqual(ids(range(0, 15)).slice(0, b!.traces.length));
    const before = segments(dir);
    // Not committed: reading on would be the replayer's error; the first segment is still there.
    expect(segments(dir)[0]).toBe(before[0]);
    await b!.commit();
    const rest = await drain(spool);
    expect(ids([...b!.traces, ...rest.traces])).toEqual(ids(range(0, 200)));
    expect(rest.damaged).toBe(0);
    expect(segments(dir)).toEqual([]);
    expect(spool.bytes).toBe(0);
    expect(spool.hasBacklog).toBe(false);
  });

  it('refuses an append that would pass its cap, and takes appends again once replay made room', async () => {
    const size = (ts: DecisionTrace[]) => encodeFrames(ts.map(encodeTrace)).length;
    const cap = size(range(0, 25));
    const spool = await spoolAt({ maxBytes: cap, segmentBytes: size(range(0, 10)) });
    expect(await spool.append(range(0, 20))).toBe(true);
    expect(await spool.append(range(20, 10))).toBe(false);
    expect(await spool.append(range(20, 5))).toBe(true);
    expect(spool.bytes).toBe(cap);
    const got = await drain(spool);
    expect(ids(got.traces)).toEqual(ids(range(0, 25)));
    expect(await spool.append(range(100, 20))).toBe(true);
  });

  it('after a crash mid-write (the last record cut short), replays every whole record and skips the torn one', async () => {
    const dir = join(root, 'spool');
    const first = await spoolAt();
    expect(await first.append(range(0, 50))).toBe(true);
    await first.close();
    open.length = 0;
    const [seg] = segments(dir);
    // A crash in the middle of writing the 50th record.
    truncateSync(join(dir, seg), statSync(join(dir, seg)).size - 30);
    const second = await spoolAt();
    const got = await drain(second);
    expect(ids(got.traces)).toEqual(ids(range(0, 49)));
    expect(got.damaged).toBe(1);
    expect(segments(dir)).toEqual([]);
  });

  it('a record damaged in the middle of a segment costs only itself', async () => {
    const dir = join(root, 'spool');
    const first = await spoolAt();
    expect(await first.append(range(0, 30))).toBe(true);
    await first.close();
    open.length = 0;
    const path = join(dir, segments(dir)[0]);
    const bytes = readFileSync(path);
    const recordBytes = encodeFrames([encodeTrace(trace(0))]).length;
    // A flipped byte inside the 11th record's payload.
    bytes[recordBytes * 10 + 40] ^= 0xff;
    writeFileSync(path, bytes);
    const got = await drain(await spoolAt());
    expect(ids(got.traces)).toEqual(ids(range(0, 30)).filter((id) => id !== 'req-10'));
    expect(got.damaged).toBe(1);
  });

  it('a restart with a non-empty spool replays what the last process left, from where its replay stopped, and appends to a new segment', async () => {
    const dir = join(root, 'spool');
    const first = await spoolAt({ segmentBytes: 8_192 });
    expect(await first.append(range(0, 100))).toBe(true);
    const b = await first.next(30);
    await b!.commit();
    await first.close();
    open.length = 0;
    const left = segments(dir);

    const second = await spoolAt({ segmentBytes: 8_192 });
    expect(second.hasBacklog).toBe(true);
    expect(await second.append(range(100, 10))).toBe(true);
    // The new appends went to a segment after every one the first process left.
    expect(segments(dir).filter((n) => !left.includes(n)).every((n) => n > left[left.length - 1])).toBe(true);
    const got = await drain(second);
    expect(ids(got.traces)).toEqual(ids(range(30, 80)));
  });

  it('a cursor past a segment the last process had replayed whole removes that segment at open', async () => {
    const dir = join(root, 'spool');
    const first = await spoolAt({ segmentBytes: 2_000 });
    for (let i = 0; i < 4; i++) expect(await first.append(range(i * 10, 10))).toBe(true);
    await first.close();
    open.length = 0;
    const [oldest] = segments(dir);
    writeFileSync(join(dir, 'replay.cursor'), JSON.stringify({ segment: Number(oldest.slice(0, 16)) + 1, offset: 0 }));
    const second = await spoolAt({ segmentBytes: 2_000 });
    expect(segments(dir)).not.toContain(oldest);
    const got = await drain(second);
    expect(ids(got.traces)).toEqual(ids(range(40 - got.traces.length, got.traces.length)));
    expect(got.traces.length).toBeLessThan(40);
  });

  it('one process per spool folder: a second open fails while the first holds it, and succeeds once it closed', async () => {
    const first = await spoolAt();
    await expect(TraceSpool.open({ dir: join(root, 'spool'), maxBytes: 1 << 20 })).rejects.toThrow(PgliteDirLockedError);
    await expect(TraceSpool.open({ dir: join(root, 'spool'), maxBytes: 1 << 20 })).rejects.toThrow(/the decision-trace spool in .* is already open in this process/);
    await first.close();
    open.length = 0;
    const again = await spoolAt();
    expect(again.hasBacklog).toBe(false);
  });

  it('a lock left by another live process names it and says why', async () => {
    const dir = join(root, 'spool');
    const first = await spoolAt();
    await first.close();
    open.length = 0;
    // A live holder on this host: pid 1 (init) with no start identity to compare.
    appendFileSync(join(dir, 'gateway.lock'), JSON.stringify({ pid: 1, hostname: require('node:os').hostname(), startedAt: 'then', token: 'x', pidNamespace: readPidNs() }));
    await expect(TraceSpool.open({ dir, maxBytes: 1 << 20 })).rejects.toThrow(/the decision-trace spool in .* is in use by another process \(pid 1 .*two processes must never append to one trace spool/);
  });
});

function readPidNs(): string | undefined {
  try {
    return require('node:fs').readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}
