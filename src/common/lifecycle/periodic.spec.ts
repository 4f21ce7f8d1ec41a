import { Periodic } from './periodic';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Work whose runs finish when the test says so, recording when each started and what it saw. */
class Work {
  started = 0;
  open = 0;
  maxOpen = 0;
  /** Bumped by the test between calls: a run returns the value it saw when it started. */
  written = 0;
  private finishers: Array<() => void> = [];

  readonly fn = async (): Promise<number> => {
    this.started++;
    this.open++;
    this.maxOpen = Math.max(this.maxOpen, this.open);
    const seen = this.written;
    await new Promise<void>((r) => this.finishers.push(r));
    this.open--;
    return seen;
  };

  /** Finishes the oldest run under way, once it has started. */
  async finish(): Promise<void> {
    while (this.finishers.length === 0) await sleep(1);
    this.finishers.shift()!();
  }
}

describe('Periodic', () => {
  it('never overlaps runs: a call during a run waits for it, then runs again and sees what was written before the call', async () => {
    const w = new Work();
    const p = new Periodic(w.fn);
    const first = p.run();
    expect(p.running).toBe(true);
    w.written = 1;
    const second = p.run();
    const third = p.run();
    await sleep(5);
    expect(w.started).toBe(1);
    await w.finish();
    expect(await first).toBe(0);
    // One run at a time: the third call's run starts only after the second's has finished.
    while (w.started < 2) await sleep(1);
    w.written = 2;
    await w.finish();
    await w.finish();
    expect([await second, await third]).toEqual([1, 2]);
    expect([w.started, w.maxOpen, p.running]).toEqual([3, 1, false]);
  });

  it('beats on its interval, skips a beat while a run is under way, and stops beating at stop()', async () => {
    const w = new Work();
    const p = new Periodic(w.fn);
    p.start(10);
    await sleep(60);
    // The first beat's run is still under way: the beats since were skipped, not queued.
    expect(w.started).toBe(1);
    await w.finish();
    while (w.started < 2) await sleep(2);
    await p.stop();
    await w.finish();
    await sleep(40);
    expect(w.started).toBe(2);
    expect(w.maxOpen).toBe(1);
  });

  it('a custom beat runs instead of a run, and is skipped while a run is under way', async () => {
    const w = new Work();
    const p = new Periodic(w.fn);
    let beats = 0;
    p.start(10, async () => void beats++);
    while (beats < 2) await sleep(2);
    const run = p.run();
    const during = beats;
    await sleep(45);
    expect(beats).toBe(during);
    await w.finish();
    await run;
    await p.stop();
  });

  it('a custom beat is single-flight too: no beat starts while the previous one is under way, and stop(waitMs) waits for it', async () => {
    const p = new Periodic(async () => 0);
    const beat = new Work();
    p.start(5, beat.fn);
    while (beat.started < 1) await sleep(1);
    await sleep(40); // eight intervals pass while the first beat is held
    expect([beat.started, beat.maxOpen]).toEqual([1, 1]);
    let stopped = false;
    const stopping = p.stop(1_000).then(() => (stopped = true));
    await sleep(10);
    expect(stopped).toBe(false);
    await beat.finish();
    await stopping;
    expect(beat.started).toBe(1);
  });

  it('run() waits for a custom beat under way, so an older beat never finishes after the run', async () => {
    const w = new Work();
    const p = new Periodic(w.fn);
    const beat = new Work();
    p.start(5, beat.fn);
    while (beat.started < 1) await sleep(1);
    const run = p.run();
    await sleep(20);
    expect(w.started).toBe(0);
    await beat.finish();
    while (w.started < 1) await sleep(1);
    await w.finish();
    await run;
    await p.stop();
  });

  it('stop(waitMs) waits for a run under way, at most waitMs; stop() waits for nothing; an interval <= 0 starts no timer', async () => {
    const w = new Work();
    const p = new Periodic(w.fn);
    const run = p.run();
    let t = Date.now();
    await p.stop();
    expect(Date.now() - t).toBeLessThan(20);
    t = Date.now();
    await p.stop(60);
    expect(Date.now() - t).toBeGreaterThanOrEqual(55);
    setTimeout(() => void w.finish(), 20);
    t = Date.now();
    await p.stop(5_000);
    expect(Date.now() - t).toBeLessThan(1_000);
    await run;

    p.start(0);
    await sleep(30);
    expect(w.started).toBe(1);
  });
});
