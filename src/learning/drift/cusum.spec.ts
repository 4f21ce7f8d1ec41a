import { mulberry32 } from '../../routing/strategies/random';
import { CusumState, hold, initialState, step } from './cusum';
import { DRIFT_CUSUM } from './drift.repository';

/** A stream like the learning outcome: y = .6·score/10 + .4·useful, score around `score` (sd 1.8, 0–10), useful with probability `useful`. */
function outcome(r: () => number, score: number, useful: number): number {
  const u1 = 1 - r();
  const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * r());
  const s = Math.min(10, Math.max(0, Math.round(score + 1.8 * z)));
  return 0.6 * (s / 10) + 0.4 * (r() < useful ? 1 : 0);
}

describe('the change detector\'s CUSUM (README "Drift: change detection")', () => {
  it('raises no alarm on 20,000 samples of an unchanged stream', () => {
    const r = mulberry32(7);
    const s = initialState();
    let alarms = 0;
    for (let i = 0; i < 20_000; i++) if (step(s, outcome(r, 8.6, 0.86), i, DRIFT_CUSUM)) alarms++;
    expect(alarms).toBe(0);
    expect(s.samples).toBe(20_000);
    expect(s.mean).toBeCloseTo(0.6 * 0.86 + 0.4 * 0.86, 1);
  });

  it('flags an abrupt drop after tens of samples, with the change point near the change, and starts again from the new level', () => {
    const r = mulberry32(11);
    const s = initialState();
    for (let i = 0; i < 500; i++) expect(step(s, outcome(r, 8.6, 0.86), i, DRIFT_CUSUM)).toBeNull();
    let alarm = null;
    let i = 500;
    for (; i < 700 && !alarm; i++) alarm = step(s, outcome(r, 6, 0.55), i, DRIFT_CUSUM);
    expect(alarm).not.toBeNull();
    expect(alarm!.direction).toBe('drop');
    expect(i - 500).toBeLessThan(60);
    expect(alarm!.since).toBeGreaterThanOrEqual(495);
    expect(alarm!.since).toBeLessThanOrEqual(i);
    expect(alarm!.after).toBeLessThan(alarm!.before - 0.15);
    // The reference is now the model as it is: the new level is no longer a change.
    expect(s.mean).toBeCloseTo(alarm!.after, 10);
    for (let j = 0; j < 2_000; j++) expect(step(s, outcome(r, 6, 0.55), 1_000 + j, DRIFT_CUSUM)).toBeNull();
  });

  it('flags an abrupt rise, and a model with a handful of samples shows the rise in its statistic before its reference is complete', () => {
    const r = mulberry32(13);
    const s = initialState();
    for (let i = 0; i < 5; i++) step(s, outcome(r, 5.8, 0.5), i, DRIFT_CUSUM);
    step(s, 0.94, 5, DRIFT_CUSUM);
    expect(s.up.s).toBeGreaterThan(1);
    const warm = initialState();
    for (let i = 0; i < 300; i++) step(warm, outcome(r, 5.8, 0.5), i, DRIFT_CUSUM);
    let alarm = null;
    let i = 300;
    for (; i < 400 && !alarm; i++) alarm = step(warm, outcome(r, 9.4, 0.95), i, DRIFT_CUSUM);
    expect(alarm?.direction).toBe('rise');
    expect(i - 300).toBeLessThan(40);
  });

  it('a starved model: with its handful of samples held as the reference, a rise of its re-tries is an alarm after tens of them; taken into the reference, several times later', () => {
    let found = 0;
    const delays: number[] = [];
    const absorbedDelays: number[] = [];
    for (let run = 0; run < 40; run++) {
      const r = mulberry32(100 + run);
      const held = initialState();
      for (let i = 0; i < 8; i++) step(held, outcome(r, 5.8, 0.5), i, DRIFT_CUSUM);
      const absorbed: CusumState = JSON.parse(JSON.stringify(held)) as CusumState;
      let absorbedAt: number | null = null;
      hold(held);
      expect(held.held).toMatchObject({ s: 0, n: 0 });
      for (let i = 8; i < 208; i++) {
        const x = outcome(r, 9.4, 0.95);
        if (absorbedAt === null && step(absorbed, x, i, DRIFT_CUSUM)) absorbedAt = i - 7;
        if (held.held === null) continue;
        const alarm = step(held, x, i, DRIFT_CUSUM);
        if (alarm) {
          expect(alarm).toMatchObject({ direction: 'rise', since: 8 });
          expect(alarm.after).toBeGreaterThan(alarm.before + 0.2);
          // The test starts again from the model as it is now.
          expect(held).toMatchObject({ held: null, n: alarm.samples });
          expect(held.mean).toBeCloseTo(alarm.after, 10);
          found++;
          delays.push(i - 7);
        }
      }
      absorbedDelays.push(absorbedAt ?? Infinity);
    }
    expect(found).toBeGreaterThanOrEqual(38);
    delays.sort((a, b) => a - b);
    expect(delays[Math.floor(delays.length / 2)]).toBeLessThanOrEqual(40);
    // Taken into the reference sample by sample, the same rise waits for the reference to fill and
    // for the CUSUM to outgrow what it absorbed: several times as long, when at all.
    absorbedDelays.sort((a, b) => a - b);
    expect(absorbedDelays.filter((d) => d <= 40).length).toBeLessThanOrEqual(2);
    expect(absorbedDelays[Math.floor(absorbedDelays.length / 2)]).toBeGreaterThan(3 * delays[Math.floor(delays.length / 2)]);
  });

  it('a starved model unchanged: the held test ends "as before" after a few re-tries, which join the reference; hold is plain numbers too', () => {
    let ended = 0;
    let alarms = 0;
    // Every answer of a hold is one routing served a worse model for: an unchanged model's are few.
    let answers = 0;
    for (let run = 0; run < 100; run++) {
      const r = mulberry32(500 + run);
      let s = initialState();
      for (let i = 0; i < 8; i++) step(s, outcome(r, 5.8, 0.5), i, DRIFT_CUSUM);
      hold(s);
      for (let i = 8; i < 48 && s.held; i++) {
        const alarm = step(s, outcome(r, 5.8, 0.5), i, DRIFT_CUSUM);
        answers++;
        s = JSON.parse(JSON.stringify(s)) as CusumState;
        if (alarm) alarms++;
        else if (s.held === null) {
          ended++;
          expect(s.n).toBe(i + 1);
        }
      }
    }
    expect(ended).toBeGreaterThanOrEqual(85);
    expect(alarms).toBeLessThanOrEqual(5);
    expect(answers / 100).toBeLessThan(4);
  });

  it('no hold on a reference of fewer than three samples, nor a second one while held', () => {
    const s = initialState();
    for (let i = 0; i < 2; i++) step(s, 0.5 + 0.1 * (i % 2), i, DRIFT_CUSUM);
    hold(s);
    expect(s.held ?? null).toBeNull();
    step(s, 0.5, 2, DRIFT_CUSUM);
    hold(s);
    step(s, 0.9, 5, DRIFT_CUSUM);
    const first = { ...s.held! };
    hold(s);
    expect(s.held).toEqual(first);
  });

  it('a constant auto stream: one failure is no alarm, a run of failures is', () => {
    const s = initialState();
    for (let i = 0; i < 200; i++) step(s, 1, i, DRIFT_CUSUM);
    expect(step(s, 0, 200, DRIFT_CUSUM)).toBeNull();
    for (let i = 201; i < 260; i++) expect(step(s, 1, i, DRIFT_CUSUM)).toBeNull();
    let alarm = null;
    for (let i = 260; i < 280 && !alarm; i++) alarm = step(s, 0, i, DRIFT_CUSUM);
    expect(alarm).toMatchObject({ direction: 'drop', since: 260 });
  });

  it('is plain numbers: a state written as JSON and read back continues the same test (a restart, another replica)', () => {
    const r1 = mulberry32(5);
    const r2 = mulberry32(5);
    const a = initialState();
    let b: CusumState = initialState();
    const alarmsA: number[] = [];
    const alarmsB: number[] = [];
    for (let i = 0; i < 3_000; i++) {
      const level = i < 1_500 ? 8.6 : 6;
      if (step(a, outcome(r1, level, 0.86), i, DRIFT_CUSUM)) alarmsA.push(i);
      if (step(b, outcome(r2, level, 0.86), i, DRIFT_CUSUM)) alarmsB.push(i);
      if (i % 97 === 0) b = JSON.parse(JSON.stringify(b)) as CusumState;
    }
    expect(alarmsB).toEqual(alarmsA);
    expect(b).toEqual(a);
    expect(alarmsA.length).toBeGreaterThan(0);
  });
});
