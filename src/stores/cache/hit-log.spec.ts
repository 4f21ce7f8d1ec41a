import { HitLog } from './hit-log';

/** The log as a plain list, oldest first. */
const list = (log: HitLog) => Array.from({ length: log.length }, (_, i) => [log.timeAt(i), log.costAt(i)]);

describe('HitLog', () => {
  it('keeps hits oldest first, drops those at or before a boundary and returns their cost', () => {
    const log = new HitLog(2);
    log.add(10, 1, 1);
    log.add(20, 5, 2);
    log.add(30, 2, 3);
    expect(list(log)).toEqual([[10, 1], [20, 5], [30, 2]]);
    expect(log.dropUntil(20)).toBe(6);
    expect(list(log)).toEqual([[30, 2]]);
    expect(log.newest()).toBe(30);
    expect(log.dropUntil(100)).toBe(2);
    expect(log.length).toBe(0);
    log.add(200, 1);
    expect(list(log)).toEqual([[200, 1]]);
  });

  it('puts a hit from a clock that stepped back before the later ones', () => {
    const log = new HitLog(4);
    log.add(10, 1, 1);
    log.add(30, 1, 2);
    log.add(20, 7, 3);
    log.add(5, 9, 4);
    expect(list(log)).toEqual([[5, 9], [10, 1], [20, 7], [30, 1]]);
    expect(log.find(3, 7)).toBe(2);
  });

  it('finds a hit by sequence and cost, and changes its cost', () => {
    const log = new HitLog();
    log.add(1, 100, 7);
    log.add(2, 50, 8);
    expect(log.find(8, 100)).toBe(-1);
    const i = log.find(8, 50);
    expect(i).toBe(1);
    log.setCost(i, 20);
    expect(list(log)).toEqual([[1, 100], [2, 20]]);
    expect(log.dropUntil(1)).toBe(100);
    expect(log.find(8, 20)).toBe(0);
  });

  it('matches a plain list through thousands of adds and drops (growing and sliding its arrays)', () => {
    const log = new HitLog(1);
    const model: number[][] = [];
    let t = 0;
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let step = 0; step < 20_000; step++) {
      if (rand() < 0.6) {
        t += Math.floor(rand() * 3);
        const cost = 1 + Math.floor(rand() * 5);
        log.add(t, cost, step + 1);
        model.push([t, cost]);
      } else {
        const boundary = t - 50;
        let freed = 0;
        while (model.length && model[0][0] <= boundary) freed += model.shift()![1];
        expect(log.dropUntil(boundary)).toBe(freed);
      }
      if (step % 997 === 0) expect(list(log)).toEqual(model);
    }
    expect(list(log)).toEqual(model);
  });
});
