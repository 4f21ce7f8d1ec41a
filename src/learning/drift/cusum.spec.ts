import { mulberry32 } from '../../routing/strategies/random';
import { CusumState, initialState, step } from './cusum';
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
