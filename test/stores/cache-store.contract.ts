import { randomUUID } from 'node:crypto';
import { BreakerParams, CacheStore, SpendCounter, SpendWindow, WindowCheck, WindowDecision } from '../../src/stores/cache/cache-store';

/** What one adapter provides to run the shared contract (one suite on both adapters). */
export interface CacheStoreFixture {
  store: CacheStore;
  /** Another handle on the same data: a second connection (a replica) on Redis, the same store in memory. */
  peer(): CacheStore;
  /** Lets `ms` of store time pass: moves the injected clock on memory, sleeps on Redis. */
  advance(ms: number): Promise<void>;
  /** True when `advance` moves a fake clock, so durations can be asserted to the millisecond. */
  exactTime: boolean;
  /** Closes every store the fixture opened. */
  dispose(): Promise<void>;
}

/** Short enough to wait out on a real server, long enough that scheduling noise stays inside the margins. */
const W = 400;
/** How far a real clock may drift from the ideal in one step (sleep overshoot, round trips, a busy CI). */
const SLOP = 150;

export function cacheStoreContract(name: string, makeStore: () => CacheStoreFixture | Promise<CacheStoreFixture>): void {
  describe(`CacheStore contract: ${name}`, () => {
    let f: CacheStoreFixture;
    let store: CacheStore;
    /** Every test writes under its own prefix (and hash tag), so runs never see each other's keys. */
    let tag: string;
    const key = (suffix: string): string => `test:{${tag}}:${suffix}`;

    beforeEach(async () => {
      f = await makeStore();
      store = f.store;
      tag = `t:${randomUUID()}`;
    });
    afterEach(() => f.dispose());

    /** On a fake clock a duration is exact; on a real one it may only have shrunk by the time it is read. */
    const expectDuration = (actual: number, ideal: number): void => {
      if (f.exactTime) expect(actual).toBe(ideal);
      else {
        expect(actual).toBeLessThanOrEqual(ideal);
        expect(actual).toBeGreaterThanOrEqual(Math.max(1, ideal - SLOP));
      }
    };

    describe('get / set / del', () => {
      it('returns what set stored, null for a missing key, and del removes keys', async () => {
        await store.set(key('a'), 'alpha', 10_000);
        await store.set(key('b'), 'beta', 10_000);
        await store.set(key('c'), 'gamma', 10_000);
        expect(await store.get(key('a'))).toBe('alpha');
        expect(await store.get(key('missing'))).toBeNull();

        await store.set(key('a'), 'alpha-2', 10_000);
        expect(await store.get(key('a'))).toBe('alpha-2');

        await store.del(key('a'), key('b'), key('missing'));
        await store.del();
        expect(await store.get(key('a'))).toBeNull();
        expect(await store.get(key('b'))).toBeNull();
        expect(await store.get(key('c'))).toBe('gamma');
      });

      it('keeps a value until its ttl has passed, then forgets it', async () => {
        await store.set(key('k'), 'v', 250);
        await f.advance(100);
        expect(await store.get(key('k'))).toBe('v');
        await f.advance(250);
        expect(await store.get(key('k'))).toBeNull();
      });

      it('set replaces the expiry along with the value', async () => {
        await store.set(key('k'), 'short', 200);
        await store.set(key('k'), 'long', 60_000);
        await f.advance(300);
        expect(await store.get(key('k'))).toBe('long');
      });

      it('stores any string unchanged', async () => {
        const value = '{"a":"é ✓ \\n"}\n\u0000end';
        await store.set(key('k'), value, 10_000);
        expect(await store.get(key('k'))).toBe(value);
      });
    });

    describe('hitWindows', () => {
      /** The explain limits (docs/api.md "POST /v1/routing/explain") in miniature: 30 per organisation AND 10 per key. */
      const explain = (apiKey: string): WindowCheck[] => [
        { key: key('explain:org'), limit: 30, windowMs: W },
        { key: key(`explain:key:${apiKey}`), limit: 10, windowMs: W },
      ];
      const hits = async (checks: WindowCheck[], n: number): Promise<WindowDecision[]> => {
        const out: WindowDecision[] = [];
        for (let i = 0; i < n; i++) out.push(await store.hitWindows(checks));
        return out;
      };

      it('allows exactly the limit of the tighter window, and a denied call spends neither window', async () => {
        const a = await hits(explain('a'), 15);
        expect(a.filter((d) => d.allowed)).toHaveLength(10);
        a.slice(0, 10).forEach((d, i) => expect(d).toEqual({ allowed: true, retryAfterMs: 0, deniedIndex: -1, counts: [i + 1, i + 1] }));
        for (const d of a.slice(10)) {
          expect(d.allowed).toBe(false);
          expect(d.deniedIndex).toBe(1);
          expect(d.counts).toEqual([10, 10]);
        }
        expectDuration(a[10].retryAfterMs, W);

        // Five denied calls for key a left the organisation's window at 10: key b's first hit is the 11th.
        const b = await hits(explain('b'), 10);
        expect(b.every((d) => d.allowed)).toBe(true);
        expect(b[0].counts).toEqual([11, 1]);
        expect(b[9].counts).toEqual([20, 10]);
        const c = await hits(explain('c'), 10);
        expect(c.every((d) => d.allowed)).toBe(true);
        expect(c[9].counts).toEqual([30, 10]);

        // The organisation is full: key d is refused by window 0 and its own window stays empty.
        const d = await hits(explain('d'), 3);
        for (const x of d) {
          expect(x.allowed).toBe(false);
          expect(x.deniedIndex).toBe(0);
          expect(x.counts).toEqual([30, 0]);
          expect(x.retryAfterMs).toBeGreaterThanOrEqual(1);
          expect(x.retryAfterMs).toBeLessThanOrEqual(W);
        }
        // Both windows full: the first denying window is the one reported.
        const both = await store.hitWindows(explain('a'));
        expect(both).toMatchObject({ allowed: false, deniedIndex: 0, counts: [30, 10] });
      });

      it('reports retryAfterMs as the time until the oldest hit of the denying window leaves it', async () => {
        const checks = [{ key: key('w'), limit: 2, windowMs: W }];
        const started = Date.now();
        expect((await store.hitWindows(checks)).allowed).toBe(true);
        await f.advance(100);
        expect((await store.hitWindows(checks)).allowed).toBe(true);
        const denied = await store.hitWindows(checks);
        expect(denied).toMatchObject({ allowed: false, deniedIndex: 0, counts: [2] });
        if (f.exactTime) expect(denied.retryAfterMs).toBe(W - 100);
        else {
          // The oldest hit is at least 100 ms and at most (now - started) old; 2 ms for rounding.
          expect(denied.retryAfterMs).toBeLessThanOrEqual(W - 100);
          expect(denied.retryAfterMs).toBeGreaterThanOrEqual(W - (Date.now() - started) - 2);
        }

        // Once the oldest hit has left, exactly one slot is free; the next one frees when the second hit leaves.
        await f.advance(denied.retryAfterMs + 20);
        expect(await store.hitWindows(checks)).toMatchObject({ allowed: true, counts: [2] });
        const again = await store.hitWindows(checks);
        expect(again).toMatchObject({ allowed: false, deniedIndex: 0 });
        if (f.exactTime) expect(again.retryAfterMs).toBe(80);
        expect(again.retryAfterMs).toBeGreaterThanOrEqual(1);
        expect(again.retryAfterMs).toBeLessThanOrEqual(100);
      });

      it('slides: hits leave one by one as they age out of the window', async () => {
        const checks = [{ key: key('s'), limit: 10, windowMs: W }];
        expect((await hits(checks, 5)).every((d) => d.allowed)).toBe(true);
        await f.advance(W / 2);
        expect((await hits(checks, 5)).every((d) => d.allowed)).toBe(true);
        expect((await store.hitWindows(checks)).allowed).toBe(false);

        // The first five have left, the last five are still inside: five slots, no more.
        await f.advance(W / 2 + 50);
        const later = await hits(checks, 7);
        expect(later.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false]);
        expect(later[4].counts).toEqual([10]);

        await f.advance(W + 50);
        expect(await store.hitWindows(checks)).toEqual({ allowed: true, retryAfterMs: 0, deniedIndex: -1, counts: [1] });
      });

      it('lets a window key expire once its last hit has left', async () => {
        await store.hitWindows([{ key: key('e'), limit: 5, windowMs: W }]);
        await expect(store.get(key('e'))).rejects.toThrow(/WRONGTYPE/);
        await f.advance(W + 100);
        expect(await store.get(key('e'))).toBeNull();
      });

      it('denies every call on a zero limit and spends nothing', async () => {
        const d = await store.hitWindows([
          { key: key('org'), limit: 5, windowMs: W },
          { key: key('zero'), limit: 0, windowMs: W },
        ]);
        expect(d).toEqual({ allowed: false, retryAfterMs: W, deniedIndex: 1, counts: [0, 0] });
        expect(await store.get(key('org'))).toBeNull();
      });

      it('gives exactly 10 of 100 concurrent calls on one key with limit 10, across replicas', async () => {
        const handles = [store, f.peer(), f.peer(), f.peer()];
        const checks = [{ key: key('burst'), limit: 10, windowMs: 60_000 }];
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => handles[i % handles.length].hitWindows(checks)));
        expect(results.filter((d) => d.allowed)).toHaveLength(10);
        expect(results.filter((d) => d.allowed).map((d) => d.counts[0]).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        expect((await store.hitWindows(checks)).counts).toEqual([10]);
      });

      it('keeps both windows exact under concurrency: 25 per org over three keys of 10', async () => {
        const handles = [store, f.peer(), f.peer()];
        const calls = ['a', 'b', 'c'].flatMap((k) =>
          Array.from({ length: 40 }, (_, i) =>
            handles[i % handles.length].hitWindows([
              { key: key('org'), limit: 25, windowMs: 60_000 },
              { key: key(`key:${k}`), limit: 10, windowMs: 60_000 },
            ]),
          ),
        );
        const results = await Promise.all(calls);
        expect(results.filter((d) => d.allowed)).toHaveLength(25);
        for (let k = 0; k < 3; k++) {
          expect(results.slice(k * 40, k * 40 + 40).filter((d) => d.allowed).length).toBeLessThanOrEqual(10);
        }
        const after = await store.hitWindows([
          { key: key('org'), limit: 25, windowMs: 60_000 },
          { key: key('key:z'), limit: 10, windowMs: 60_000 },
        ]);
        expect(after).toMatchObject({ allowed: false, deniedIndex: 0, counts: [25, 0] });
      });

      it('refuses malformed checks before touching anything', async () => {
        const ok = { key: key('x'), limit: 1, windowMs: W };
        await expect(store.hitWindows([])).rejects.toThrow(RangeError);
        await expect(store.hitWindows([ok, { ...ok }])).rejects.toThrow(/distinct/);
        await expect(store.hitWindows([{ ...ok, limit: -1 }])).rejects.toThrow(RangeError);
        await expect(store.hitWindows([{ ...ok, limit: 1.5 }])).rejects.toThrow(RangeError);
        await expect(store.hitWindows([{ ...ok, windowMs: 0 }])).rejects.toThrow(RangeError);
        // Redis Cluster runs a script on one slot: keys of one call must share a hash tag.
        await expect(store.hitWindows([ok, { key: 'test:{elsewhere}:y', limit: 1, windowMs: W }])).rejects.toThrow(/hash tag/);
        await expect(store.hitWindows([{ key: 'untagged:a', limit: 1, windowMs: W }, { key: 'untagged:b', limit: 1, windowMs: W }])).rejects.toThrow(/hash tag/);
        expect(await store.get(key('x'))).toBeNull();
      });
    });

    describe('incrementBelow', () => {
      it('counts up to the limit, then refuses without changing the value', async () => {
        const k = key('month');
        const seen = [];
        for (let i = 0; i < 5; i++) seen.push(await store.incrementBelow(k, 3, 60_000));
        expect(seen).toEqual([
          { allowed: true, value: 1 },
          { allowed: true, value: 2 },
          { allowed: true, value: 3 },
          { allowed: false, value: 3 },
          { allowed: false, value: 3 },
        ]);
        expect(await store.get(k)).toBe('3');
        // A higher limit (a plan upgrade) continues from the stored value.
        expect(await store.incrementBelow(k, 4, 60_000)).toEqual({ allowed: true, value: 4 });
      });

      it('refuses at a zero limit without creating the counter', async () => {
        expect(await store.incrementBelow(key('zero'), 0, 60_000)).toEqual({ allowed: false, value: 0 });
        expect(await store.get(key('zero'))).toBeNull();
      });

      it('sets the expiry when the counter is created and never extends it', async () => {
        const k = key('ttl');
        expect(await store.incrementBelow(k, 10, 300)).toEqual({ allowed: true, value: 1 });
        await f.advance(200);
        expect(await store.incrementBelow(k, 10, 300)).toEqual({ allowed: true, value: 2 });
        await f.advance(200);
        expect(await store.get(k)).toBeNull();
        expect(await store.incrementBelow(k, 10, 300)).toEqual({ allowed: true, value: 1 });
      });

      it('gives exactly 37 of 100 concurrent increments with limit 37, across replicas', async () => {
        const k = key('burst');
        const handles = [store, f.peer(), f.peer(), f.peer()];
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => handles[i % handles.length].incrementBelow(k, 37, 60_000)));
        const allowed = results.filter((r) => r.allowed);
        expect(allowed).toHaveLength(37);
        expect(allowed.map((r) => r.value).sort((x, y) => x - y)).toEqual(Array.from({ length: 37 }, (_, i) => i + 1));
        expect(results.filter((r) => !r.allowed).every((r) => r.value === 37)).toBe(true);
        expect(await store.get(k)).toBe('37');
      });

      it('rejects a key that does not hold an integer, and bad arguments', async () => {
        await store.set(key('text'), 'abc', 60_000);
        await expect(store.incrementBelow(key('text'), 10, 60_000)).rejects.toThrow(/not an integer/);
        expect(await store.get(key('text'))).toBe('abc');
        await expect(store.incrementBelow(key('n'), -1, 60_000)).rejects.toThrow(RangeError);
        await expect(store.incrementBelow(key('n'), 10, 0)).rejects.toThrow(RangeError);
        await expect(store.set(key('n'), 'v', 0)).rejects.toThrow(RangeError);
        await expect(store.set(key('n'), 'v', Number.NaN)).rejects.toThrow(RangeError);
      });
    });

    describe('spend and settle', () => {
      /** A tokens-per-minute window of `limit` spending `cost`. */
      const tpm = (name: string, limit: number, cost: number, windowMs = W): SpendWindow => ({ key: key(name), limit, windowMs, cost });
      const month = (name: string, limit: number, amount: number, more: Partial<SpendCounter> = {}): SpendCounter => ({ key: key(name), limit, amount, ttlMs: 60_000, ...more });

      it('admits while the costs in the window fit the limit; a denied call spends no window and no counter', async () => {
        const a = await store.spend([tpm('t', 100, 40)], []);
        expect(a).toMatchObject({ outcome: 'allowed', deniedIndex: -1, retryAfterMs: 0, windows: [40], counters: [] });
        expect(a.hit).toEqual(expect.any(String));
        expect((await store.spend([tpm('t', 100, 60)], [])).windows).toEqual([100]);
        const full = await store.spend([tpm('t', 100, 1), tpm('r', 10, 1)], [month('c', 5, 1, { seed: 0 })]);
        expect(full).toMatchObject({ outcome: 'denied', deniedIndex: 0, windows: [100, 0], counters: [0], hit: null });
        expectDuration(full.retryAfterMs, W);
        // Nothing of the denied call was spent: its other window is empty, its counter only created at its seed.
        expect(await store.spend([tpm('r', 10, 0)], [month('c', 5, 0)])).toMatchObject({ outcome: 'allowed', windows: [0], counters: [0] });
        // A cost of 0 fits a full window.
        expect((await store.spend([tpm('t', 100, 0)], [])).outcome).toBe('allowed');
      });

      it('frees cost as hits leave the window, and reports the wait until enough has left for this cost', async () => {
        expect((await store.spend([tpm('s', 100, 30)], [])).outcome).toBe('allowed');
        await f.advance(100);
        expect((await store.spend([tpm('s', 100, 30)], [])).outcome).toBe('allowed');
        expect((await store.spend([tpm('s', 100, 30)], [])).outcome).toBe('allowed');
        // 90 spent: 20 more needs the first hit (30) to leave, about W - 100 from now; 50 needs the first two.
        const d20 = await store.spend([tpm('s', 100, 20)], []);
        expect(d20).toMatchObject({ outcome: 'denied', deniedIndex: 0, windows: [90] });
        if (f.exactTime) expect(d20.retryAfterMs).toBe(W - 100);
        expect(d20.retryAfterMs).toBeLessThanOrEqual(W - 100);
        expect((await store.spend([tpm('s', 100, 10)], [])).windows).toEqual([100]);
        const d50 = await store.spend([tpm('s', 100, 50)], []);
        if (f.exactTime) expect(d50.retryAfterMs).toBe(W);
        expect(d50.retryAfterMs).toBeGreaterThan(d20.retryAfterMs);
        await f.advance(d20.retryAfterMs + 20);
        expect(await store.spend([tpm('s', 100, 30)], [])).toMatchObject({ outcome: 'allowed', windows: [100] });
        await f.advance(W + 50);
        expect((await store.spend([tpm('s', 100, 100)], [])).windows).toEqual([100]);
      });

      it('never admits a cost over the limit and reports one window as the wait; a zero limit the same', async () => {
        expect(await store.spend([tpm('big', 10, 11)], [])).toMatchObject({ outcome: 'denied', deniedIndex: 0, retryAfterMs: W, windows: [0] });
        expect(await store.spend([tpm('zero', 0, 1)], [])).toMatchObject({ outcome: 'denied', retryAfterMs: W });
        expect(await store.get(key('big:sum'))).toBeNull();
      });

      it('reports a counter without a seed as missing, creates one at its seed, and rebuilds one on reseed', async () => {
        const c = month('m', 10, 1);
        expect(await store.spend([], [c])).toEqual({ outcome: 'missing', deniedIndex: -1, retryAfterMs: 0, windows: [], counters: [null], hit: null });
        expect(await store.get(c.key)).toBeNull();
        expect(await store.spend([], [{ ...c, seed: 8 }])).toMatchObject({ outcome: 'allowed', counters: [9] });
        // An existing counter ignores a seed: replicas that read the durable count at once create it once.
        expect(await store.spend([], [{ ...c, seed: 0 }])).toMatchObject({ outcome: 'allowed', counters: [10] });
        expect(await store.spend([], [c])).toMatchObject({ outcome: 'denied', deniedIndex: 0, counters: [10] });
        expect(await store.get(c.key)).toBe('10');
        expect(await store.spend([], [{ ...c, seed: 3, reseed: true }])).toMatchObject({ outcome: 'allowed', counters: [4] });
        // A seed at the limit refuses the call that brought it, and the counter is created at the seed
        // all the same (so the next call needs none); an unseeded missing one beside it is not.
        const full = month('full', 5, 1, { seed: 5 });
        expect(await store.spend([], [full, month('other', 5, 1)])).toMatchObject({ outcome: 'denied', deniedIndex: 0, counters: [5, null] });
        expect(await store.get(full.key)).toBe('5');
        expect(await store.get(key('other'))).toBeNull();
        expect(await store.spend([], [{ ...full, seed: undefined }])).toMatchObject({ outcome: 'denied', counters: [5] });
      });

      it('a denying window or existing counter wins over a missing counter: the caller need not seed to be refused', async () => {
        await store.spend([], [month('done', 1, 1, { seed: 0 })]);
        expect(await store.spend([], [month('gone', 10, 1), month('done', 1, 1)])).toMatchObject({ outcome: 'denied', deniedIndex: 1, counters: [null, 1] });
        expect(await store.spend([tpm('w0', 0, 1)], [month('gone', 10, 1)])).toMatchObject({ outcome: 'denied', deniedIndex: 0 });
      });

      it('adds amounts to counters, sets the expiry when one is created and never extends it', async () => {
        const c = month('ttl', 1_000, 250, { ttlMs: 300, seed: 0 });
        expect((await store.spend([], [c])).counters).toEqual([250]);
        await f.advance(200);
        expect((await store.spend([], [c])).counters).toEqual([500]);
        expect(await store.spend([], [{ ...c, amount: 501 }])).toMatchObject({ outcome: 'denied', counters: [500] });
        await f.advance(200);
        expect(await store.get(c.key)).toBeNull();
      });

      it('settle replaces a hit\'s cost at its own time, moves counters, and leaves what is gone alone', async () => {
        const s = await store.spend([tpm('st', 100, 80)], [month('sc', 1_000, 300, { seed: 100 })]);
        expect(s.outcome).toBe('allowed');
        await store.settle([{ key: key('st'), hit: s.hit!, from: 80, to: 15 }], [{ key: key('sc'), delta: -250 }]);
        expect((await store.spend([tpm('st', 100, 85)], [])).windows).toEqual([100]);
        expect(await store.get(key('sc'))).toBe('150');
        // A settle that overshoots is charged anyway; the window then refuses until it slides.
        const more = await store.spend([tpm('over', 100, 10)], []);
        await store.settle([{ key: key('over'), hit: more.hit!, from: 10, to: 150 }], []);
        expect(await store.spend([tpm('over', 100, 0)], [])).toMatchObject({ outcome: 'denied', windows: [150] });
        // Never below 0; a counter that is gone is not created; a hit that left its window is not found.
        await store.settle([], [{ key: key('sc'), delta: -1_000 }, { key: key('nothing'), delta: 5 }]);
        expect(await store.get(key('sc'))).toBe('0');
        expect(await store.get(key('nothing'))).toBeNull();
        await f.advance(W + 50);
        await store.settle([{ key: key('st'), hit: s.hit!, from: 15, to: 99 }], []);
        expect((await store.spend([tpm('st', 100, 100)], [])).windows).toEqual([100]);
        // An unknown hit, or one named with the wrong cost, changes nothing.
        const t = await store.spend([tpm('ok', 100, 10)], []);
        await store.settle([{ key: key('ok'), hit: t.hit!, from: 11, to: 90 }], []);
        expect((await store.spend([tpm('ok', 100, 0)], [])).windows).toEqual([10]);
      });

      it('gives exactly 100 of 1,000 concurrent spends of one requests window, across replicas', async () => {
        const handles = [store, f.peer(), f.peer(), f.peer()];
        const rpm = [{ key: key('rpm'), limit: 100, windowMs: 60_000, cost: 1 }];
        const results = await Promise.all(Array.from({ length: 1_000 }, (_, i) => handles[i % handles.length].spend(rpm, [])));
        const allowed = results.filter((d) => d.outcome === 'allowed');
        expect(allowed).toHaveLength(100);
        expect(allowed.map((d) => d.windows[0]).sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
        expect(new Set(allowed.map((d) => d.hit)).size).toBe(100);
      });

      it('keeps windows and counters exact together under concurrency: a budget of 37 spends over two windows', async () => {
        const handles = [store, f.peer(), f.peer()];
        const results = await Promise.all(
          Array.from({ length: 200 }, (_, i) =>
            handles[i % handles.length].spend(
              [{ key: key('org-tpm'), limit: 1_000_000, windowMs: 60_000, cost: 7 }, { key: key(`key-${i % 2}`), limit: 30, windowMs: 60_000, cost: 1 }],
              [{ key: key('budget'), limit: 37 * 41, amount: 41, ttlMs: 60_000, seed: 0 }],
            ),
          ),
        );
        const allowed = results.filter((d) => d.outcome === 'allowed');
        expect(allowed).toHaveLength(37);
        expect(await store.get(key('budget'))).toBe(String(37 * 41));
        const after = await store.spend([{ key: key('org-tpm'), limit: 1_000_000, windowMs: 60_000, cost: 0 }], []);
        expect(after.windows).toEqual([37 * 7]);
      });

      it('refuses malformed calls before touching anything, and a key of another type', async () => {
        const w = tpm('x', 10, 1);
        await expect(store.spend([], [])).rejects.toThrow(RangeError);
        await expect(store.spend([w, { ...w }], [])).rejects.toThrow(/distinct/);
        await expect(store.spend([{ ...w, cost: -1 }], [])).rejects.toThrow(RangeError);
        await expect(store.spend([{ ...w, cost: 1.5 }], [])).rejects.toThrow(RangeError);
        await expect(store.spend([{ ...w, windowMs: 0 }], [])).rejects.toThrow(RangeError);
        await expect(store.spend([], [month('c', 1, 1, { seed: -2 })])).rejects.toThrow(RangeError);
        await expect(store.spend([], [month('c', 1, 1, { reseed: true })])).rejects.toThrow(RangeError);
        // One slot on Redis Cluster: a window alone is two keys, so even one needs a hash tag.
        await expect(store.spend([{ key: 'untagged', limit: 1, windowMs: W, cost: 1 }], [])).rejects.toThrow(/hash tag/);
        await expect(store.spend([w], [{ key: 'test:{elsewhere}:c', limit: 1, amount: 1, ttlMs: 1_000 }])).rejects.toThrow(/hash tag/);
        await expect(store.settle([{ key: key('x'), hit: 'a|b', from: 1, to: 2 }], [])).rejects.toThrow(RangeError);
        await expect(store.settle([], [{ key: key('c'), delta: 0.5 }])).rejects.toThrow(RangeError);
        expect(await store.get(key('x:sum'))).toBeNull();
        await store.set(key('text'), 'abc', 60_000);
        await expect(store.spend([], [month('text', 10, 1)])).rejects.toThrow(/not an integer/);
        await expect(store.spend([tpm('text', 10, 1)], [])).rejects.toThrow(/WRONGTYPE/);
      });
    });

    describe('breaker', () => {
      /** The documented defaults (docs/architecture.md "Circuit breakers"); random 0.5 means no jitter, so open times are exact. */
      const P: BreakerParams = {
        failureThreshold: 5,
        windowMs: 10_000,
        buckets: 10,
        minRequests: 20,
        failureRatio: 0.5,
        baseOpenMs: 5_000,
        maxOpenMs: 60_000,
        jitter: 0.2,
        random: 0.5,
        probeLeaseMs: 30_000,
        ttlMs: 600_000,
      };
      /** An explicit clock (nowMs), so these run to the millisecond on Redis too. */
      const T0 = 1_750_000_000_000;

      it('opens after exactly failureThreshold consecutive failures, and a success resets the run', async () => {
        const k = key('cb');
        expect(await store.breaker(k, 'acquire', P, T0)).toEqual({ state: 'closed', permit: 'allow', openUntil: null, consecutiveFailures: 0, openings: 0, opened: false });
        for (let i = 1; i <= 4; i++) expect(await store.breaker(k, 'failure', P, T0 + i)).toMatchObject({ state: 'closed', consecutiveFailures: i, opened: false });
        expect(await store.breaker(k, 'success', P, T0 + 5)).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
        for (let i = 1; i <= 4; i++) expect((await store.breaker(k, 'failure', P, T0 + 10 + i)).state).toBe('closed');
        const fifth = await store.breaker(k, 'failure', P, T0 + 20);
        expect(fifth).toEqual({ state: 'open', permit: null, openUntil: T0 + 20 + 5_000, consecutiveFailures: 5, openings: 1, opened: true });
        // Reports that arrive while open change nothing and open nothing again.
        expect(await store.breaker(k, 'failure', P, T0 + 30)).toMatchObject({ state: 'open', openUntil: T0 + 5_020, opened: false, consecutiveFailures: 5 });
        expect(await store.breaker(k, 'success', P, T0 + 31)).toMatchObject({ state: 'open', opened: false });
        expect(await store.breaker(k, 'acquire', P, T0 + 5_019)).toMatchObject({ state: 'open', permit: 'reject' });
      });

      it('opens when at least failureRatio of at least minRequests requests in the window failed', async () => {
        // Alternating failures never make 5 in a row. 19 requests with 10 failures: below minRequests.
        const a = key('rate-a');
        let t = T0;
        for (let i = 0; i < 19; i++) {
          const d = await store.breaker(a, i % 2 === 0 ? 'failure' : 'success', P, (t += 100));
          expect([i, d.state]).toEqual([i, 'closed']);
        }
        // The 20th request, a success: 10 of 20 failed = 50 %.
        expect(await store.breaker(a, 'success', P, (t += 100))).toMatchObject({ state: 'open', opened: true, openings: 1, consecutiveFailures: 0 });

        // 9 of 20, then 10 of 21: below 50 %; 11 of 22 is 50 %.
        const b = key('rate-b');
        t = T0;
        for (let i = 0; i < 19; i++) await store.breaker(b, i % 2 === 0 ? 'success' : 'failure', P, (t += 100));
        expect(await store.breaker(b, 'success', P, (t += 100))).toMatchObject({ state: 'closed' });
        expect(await store.breaker(b, 'failure', P, (t += 100))).toMatchObject({ state: 'closed' });
        expect(await store.breaker(b, 'failure', P, (t += 100))).toMatchObject({ state: 'open', opened: true, consecutiveFailures: 2 });
      });

      it('takes `repeat` successes in one step, each counted and checked as if it came alone', async () => {
        // Counted one by one: 10 successes and then 10 failures are 10 of 20, which opens (rather than
        // at the 19th failure, were the 10 counted as one request).
        const many = { ...P, failureThreshold: 100 };
        const k = key('repeat');
        let t = T0;
        expect(await store.breaker(k, 'success', many, (t += 10), 10)).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
        for (let i = 1; i < 10; i++) expect((await store.breaker(k, 'failure', many, (t += 10))).state).toBe('closed');
        expect(await store.breaker(k, 'failure', many, (t += 10))).toMatchObject({ state: 'open', opened: true, consecutiveFailures: 10 });
        // Checked after each: 10 of 19 failed, then the first of three successes makes 10 of 20 and opens
        // it (checked once at the end, 10 of 22 would not); the two after it change nothing.
        const r = key('repeat-rate');
        t = T0;
        for (let i = 0; i < 19; i++) await store.breaker(r, i % 2 === 0 ? 'failure' : 'success', P, (t += 100));
        expect(await store.breaker(r, 'success', P, (t += 100), 3)).toMatchObject({ state: 'open', opened: true, openings: 1, consecutiveFailures: 0 });
        // Only successes repeat.
        await expect(store.breaker(key('repeat-bad'), 'failure', P, T0, 2)).rejects.toThrow(RangeError);
        await expect(store.breaker(key('repeat-bad'), 'success', P, T0, 0)).rejects.toThrow(RangeError);
      });

      it('counts only the requests of the last window', async () => {
        const k = key('window');
        let t = T0;
        // Runs of four failures: 19 requests, 16 failed, never five in a row.
        for (let i = 0; i < 19; i++) expect((await store.breaker(k, i % 5 === 4 ? 'success' : 'failure', P, (t += 10))).state).toBe('closed');
        // Once the window has slid past them, two more requests (one failed) are all there is: 2 < 20.
        t += P.windowMs + 1_000;
        expect(await store.breaker(k, 'success', P, (t += 10))).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
        expect(await store.breaker(k, 'failure', P, (t += 10))).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
        // Within one window the same 19 + 1 would have opened it (control).
        const c = key('window-control');
        for (let i = 0; i < 19; i++) await store.breaker(c, i % 5 === 4 ? 'success' : 'failure', P, T0 + i);
        expect(await store.breaker(c, 'success', P, T0 + 100)).toMatchObject({ state: 'open', opened: true });
      });

      it('half-opens when the open time is over and gives exactly one probe lease, which expires', async () => {
        const k = key('half');
        for (let i = 0; i < 5; i++) await store.breaker(k, 'failure', P, T0);
        const until = T0 + 5_000;
        expect(await store.breaker(k, 'state', P, until - 1)).toMatchObject({ state: 'open', openUntil: until });
        expect(await store.breaker(k, 'state', P, until)).toMatchObject({ state: 'half_open', openUntil: until });
        expect(await store.breaker(k, 'acquire', P, until)).toMatchObject({ state: 'half_open', permit: 'probe' });
        expect(await store.breaker(k, 'acquire', P, until + 1)).toMatchObject({ state: 'half_open', permit: 'reject' });
        expect(await store.breaker(k, 'acquire', P, until + P.probeLeaseMs - 1)).toMatchObject({ permit: 'reject' });
        // The probe's holder never reported (a crashed replica): once the lease is over, someone else may probe.
        expect(await store.breaker(k, 'acquire', P, until + P.probeLeaseMs)).toMatchObject({ permit: 'probe' });
        expect(await store.breaker(k, 'acquire', P, until + P.probeLeaseMs + 1)).toMatchObject({ permit: 'reject' });
      });

      it('a successful probe closes and resets openings; a failed one re-opens for longer, up to the cap', async () => {
        const k = key('probe');
        for (let i = 0; i < 5; i++) await store.breaker(k, 'failure', P, T0);
        let t = T0 + 5_000;
        const expected = [10_000, 20_000, 40_000, 60_000, 60_000];
        for (const [i, ms] of expected.entries()) {
          expect((await store.breaker(k, 'acquire', P, t)).permit).toBe('probe');
          const d = await store.breaker(k, 'probe_failure', P, t + 10);
          expect(d).toMatchObject({ state: 'open', opened: true, openings: i + 2, openUntil: t + 10 + ms });
          t = d.openUntil!;
        }
        expect((await store.breaker(k, 'acquire', P, t)).permit).toBe('probe');
        expect(await store.breaker(k, 'probe_success', P, t + 10)).toEqual({ state: 'closed', permit: null, openUntil: null, consecutiveFailures: 0, openings: 0, opened: false });
        expect((await store.breaker(k, 'acquire', P, t + 11)).permit).toBe('allow');
        // Openings were reset: the next opening is the short one again.
        for (let i = 0; i < 5; i++) await store.breaker(k, 'failure', P, t + 20);
        expect(await store.breaker(k, 'state', P, t + 20)).toMatchObject({ state: 'open', openings: 1, openUntil: t + 20 + 5_000 });
      });

      it('probe_release gives the lease back at once and counts neither a success nor a failure', async () => {
        const k = key('release');
        for (let i = 0; i < 5; i++) await store.breaker(k, 'failure', P, T0);
        const until = T0 + 5_000;
        const opened = await store.breaker(k, 'state', P, until);
        expect(await store.breaker(k, 'acquire', P, until)).toMatchObject({ permit: 'probe' });
        expect((await store.breaker(k, 'acquire', P, until + 1)).permit).toBe('reject');
        // The probe's client went away: no verdict, and the next caller probes without waiting out the lease.
        const released = await store.breaker(k, 'probe_release', P, until + 2);
        expect(released).toEqual({ state: 'half_open', permit: null, openUntil: until, consecutiveFailures: opened.consecutiveFailures, openings: 1, opened: false });
        expect(await store.breaker(k, 'acquire', P, until + 3)).toMatchObject({ state: 'half_open', permit: 'probe' });
        expect((await store.breaker(k, 'acquire', P, until + 4)).permit).toBe('reject');
        // That probe's verdict still counts as usual.
        expect(await store.breaker(k, 'probe_success', P, until + 5)).toMatchObject({ state: 'closed', openings: 0 });
      });

      it('probe_release changes nothing on a closed breaker, an open one, or a half-open one with no lease out', async () => {
        const c = key('release-closed');
        await store.breaker(c, 'failure', P, T0);
        expect(await store.breaker(c, 'probe_release', P, T0 + 1)).toEqual({ state: 'closed', permit: null, openUntil: null, consecutiveFailures: 1, openings: 0, opened: false });
        expect(await store.breaker(c, 'state', P, T0 + 2)).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
        // Counted nothing: four more failures open it, as they would have without the release.
        for (let i = 0; i < 3; i++) await store.breaker(c, 'failure', P, T0 + 3);
        expect((await store.breaker(c, 'state', P, T0 + 3)).state).toBe('closed');
        expect((await store.breaker(c, 'failure', P, T0 + 3)).opened).toBe(true);

        const o = key('release-open');
        for (let i = 0; i < 5; i++) await store.breaker(o, 'failure', P, T0);
        const until = T0 + 5_000;
        expect(await store.breaker(o, 'probe_release', P, until - 1)).toMatchObject({ state: 'open', openUntil: until, openings: 1, opened: false });
        expect(await store.breaker(o, 'probe_release', P, until)).toMatchObject({ state: 'half_open', openUntil: until, openings: 1 });
        expect((await store.breaker(o, 'acquire', P, until + 1)).permit).toBe('probe');
        // A probe that re-opened the breaker is not undone by a late release.
        await store.breaker(o, 'probe_failure', P, until + 2);
        expect(await store.breaker(o, 'probe_release', P, until + 3)).toMatchObject({ state: 'open', openings: 2 });
        expect((await store.breaker(o, 'acquire', P, until + 4)).permit).toBe('reject');
      });

      it('a late probe report after another probe already re-opened the breaker changes nothing', async () => {
        const k = key('late');
        for (let i = 0; i < 5; i++) await store.breaker(k, 'failure', P, T0);
        const until = T0 + 5_000;
        await store.breaker(k, 'acquire', P, until);
        const reopened = await store.breaker(k, 'probe_failure', P, until + 1);
        expect(reopened).toMatchObject({ state: 'open', openings: 2 });
        expect(await store.breaker(k, 'probe_failure', P, until + 2)).toMatchObject({ state: 'open', openings: 2, openUntil: reopened.openUntil, opened: false });
        expect(await store.breaker(k, 'probe_success', P, until + 3)).toMatchObject({ state: 'open', openings: 2 });
        // Probe reports on a closed breaker count like plain ones.
        const c = key('closed-probe');
        expect(await store.breaker(c, 'probe_failure', P, T0)).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
        expect(await store.breaker(c, 'probe_success', P, T0)).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
      });

      it('jitters the open time within ±jitter of the nominal time', async () => {
        const open = async (random: number): Promise<number> => {
          const k = key(`jitter:${random}`);
          let d;
          for (let i = 0; i < 5; i++) d = await store.breaker(k, 'failure', { ...P, random }, T0);
          return d!.openUntil! - T0;
        };
        expect(await open(0)).toBe(4_000);
        expect(await open(0.25)).toBe(4_500);
        expect(await open(0.75)).toBe(5_500);
        const top = await open(0.999999);
        expect(top).toBeGreaterThan(5_990);
        expect(top).toBeLessThan(6_000);
      });

      it('gives exactly one probe to 50 concurrent acquires while half-open, across replicas', async () => {
        const k = key('race');
        for (let i = 0; i < 5; i++) await store.breaker(k, 'failure', P, T0);
        const handles = [store, f.peer(), f.peer(), f.peer(), f.peer()];
        const permits = await Promise.all(Array.from({ length: 50 }, (_, i) => handles[i % handles.length].breaker(k, 'acquire', P, T0 + 6_000)));
        expect(permits.filter((d) => d.permit === 'probe')).toHaveLength(1);
        expect(permits.filter((d) => d.permit === 'reject')).toHaveLength(49);
      });

      it('state reads without writing; the store clock is used when nowMs is omitted; idle state expires', async () => {
        const k = key('clock');
        expect(await store.breaker(k, 'state', P)).toEqual({ state: 'closed', permit: null, openUntil: null, consecutiveFailures: 0, openings: 0, opened: false });
        await expect(store.get(k)).resolves.toBeNull();
        const short = { ...P, baseOpenMs: 200, maxOpenMs: 200, jitter: 0, ttlMs: 300 };
        let d;
        for (let i = 0; i < 5; i++) d = await store.breaker(k, 'failure', short);
        expect(d).toMatchObject({ state: 'open', opened: true });
        expect((await store.breaker(k, 'acquire', short)).permit).toBe('reject');
        await f.advance(250);
        expect(await store.breaker(k, 'acquire', short)).toMatchObject({ state: 'half_open', permit: 'probe' });
        // Nobody writes for longer than ttlMs: the breaker is forgotten.
        await f.advance(400);
        expect(await store.breaker(k, 'state', short)).toMatchObject({ state: 'closed', openings: 0, consecutiveFailures: 0 });
        await expect(store.get(k)).resolves.toBeNull();
      });

      it('refuses bad arguments and a key of another type', async () => {
        await expect(store.breaker(key('b'), 'nope' as never, P, T0)).rejects.toThrow(RangeError);
        await expect(store.breaker(key('b'), 'acquire', { ...P, failureThreshold: 0 }, T0)).rejects.toThrow(RangeError);
        await expect(store.breaker(key('b'), 'acquire', { ...P, failureRatio: 1.5 }, T0)).rejects.toThrow(RangeError);
        await expect(store.breaker(key('b'), 'acquire', { ...P, random: 1 }, T0)).rejects.toThrow(RangeError);
        await expect(store.breaker(key('b'), 'acquire', { ...P, maxOpenMs: 10 }, T0)).rejects.toThrow(RangeError);
        await store.set(key('s'), 'text', 60_000);
        await expect(store.breaker(key('s'), 'acquire', P, T0)).rejects.toThrow(/WRONGTYPE/);
      });
    });

    describe('ping and close', () => {
      it('answers ping while open and rejects calls once closed', async () => {
        await expect(store.ping(1_000)).resolves.toBeUndefined();
        await store.close();
        await expect(store.get(key('k'))).rejects.toThrow();
        await expect(store.ping(1_000)).rejects.toThrow();
        await expect(store.close()).resolves.toBeUndefined();
      });
    });
  });
}
