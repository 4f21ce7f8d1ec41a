import { segmentsOf } from './usage-segments';

const M = 60_000;
const H = 3_600_000;
const D = 86_400_000;
const T0 = Date.UTC(2026, 0, 10);
const all = { minuteFrom: 0, rollupFrom: -Infinity };
const show = (xs: ReturnType<typeof segmentsOf>) => xs.map((s) => [s.source, (s.from - T0) / M, (s.to - T0) / M]);

describe('segmentsOf', () => {
  it('an aligned range is whole buckets of its own step', () => {
    expect(show(segmentsOf(T0, T0 + 3 * D, 'day', all))).toEqual([['day', 0, 3 * 1440]]);
    expect(show(segmentsOf(T0 + H, T0 + 5 * H, 'hour', all))).toEqual([['hour', 60, 300]]);
    expect(show(segmentsOf(T0, T0 + 5 * M, 'minute', all))).toEqual([['minute', 0, 5]]);
  });

  it('cut edges: whole hours, then whole minutes, then the seconds from the traces', () => {
    const from = T0 + 2 * H + 30 * M + 15_000;
    const to = T0 + 3 * D + 5 * H + 7 * M + 500;
    expect(show(segmentsOf(from, to, 'day', all))).toEqual([
      ['raw', 150.25, 151],
      ['minute', 151, 180],
      ['hour', 180, 1440],
      ['day', 1440, 3 * 1440],
      ['hour', 3 * 1440, 3 * 1440 + 300],
      ['minute', 3 * 1440 + 300, 3 * 1440 + 307],
      ['raw', 3 * 1440 + 307, 3 * 1440 + 307 + 500 / M],
    ]);
  });

  it('a range inside one bucket has no part of its own step', () => {
    expect(show(segmentsOf(T0 + 10 * M, T0 + 50 * M, 'hour', all))).toEqual([['minute', 10, 50]]);
    expect(show(segmentsOf(T0 + 1000, T0 + 2000, 'day', all))).toEqual([['raw', 1000 / M, 2000 / M]]);
  });

  it('minutes before the minute horizon, and buckets before the rollups kept, are read from the traces', () => {
    const cov = { minuteFrom: T0 + 2 * H, rollupFrom: T0 + 30 * M };
    // 00:10–05:20 by the hour: [00:10, 01:00) raw (before the hour rows are whole, and before minutes
    // are kept), [01:00, 05:00) hours, [05:00, 05:20) minutes.
    expect(show(segmentsOf(T0 + 10 * M, T0 + 5 * H + 20 * M, 'hour', cov))).toEqual([
      ['raw', 10, 60],
      ['hour', 60, 300],
      ['minute', 300, 320],
    ]);
    // By the minute: raw until the horizon, minutes from it.
    expect(show(segmentsOf(T0 + H, T0 + 3 * H, 'minute', cov))).toEqual([
      ['raw', 60, 120],
      ['minute', 120, 180],
    ]);
    // Nothing rolled up yet: all of it from the traces.
    expect(show(segmentsOf(T0, T0 + 2 * D, 'day', { minuteFrom: null, rollupFrom: Infinity }))).toEqual([['raw', 0, 2 * 1440]]);
  });

  it('the segments tile the range, in order, with at most one of the query step', () => {
    const cov = { minuteFrom: T0 + 7 * D, rollupFrom: T0 + 2 * D + 17 * M };
    for (let i = 0; i < 500; i++) {
      const step = (['minute', 'hour', 'day'] as const)[i % 3];
      const a = T0 + Math.floor(((i * 7919) % 10_007) / 10_007 * 10 * D);
      const b = a + 1 + Math.floor(((i * 104_729) % 9_973) / 9_973 * 4 * D);
      const segs = segmentsOf(a, b, step, cov);
      expect(segs[0].from).toBe(a);
      expect(segs[segs.length - 1].to).toBe(b);
      segs.forEach((s, j) => {
        expect(s.from).toBeLessThan(s.to);
        if (j > 0) expect(s.from).toBe(segs[j - 1].to);
        if (s.source !== 'raw') {
          const w = { minute: M, hour: H, day: D }[s.source];
          expect([s.from % w, s.to % w]).toEqual([0, 0]);
          expect(s.from).toBeGreaterThanOrEqual(s.source === 'minute' ? cov.minuteFrom : cov.rollupFrom);
        }
      });
      expect(segs.filter((s) => s.source === step).length).toBeLessThanOrEqual(1);
    }
  });
});
