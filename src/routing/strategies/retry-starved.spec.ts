import { FakeRegressions, FakeStats, FixedClock, makeConfig, makeInput, seededRandom } from '../../../test/support/kit';
import { RoutingService } from '../routing.service';
import type { RoutingDecision, RoutingInput } from '../routing.types';

/**
 * Starved candidates re-tried (routing.retry_starved, README "Routing that learns"): a feedback_driven
 * candidate that routing has starved gets a small, bounded share of the requests again (and keeps it
 * while the re-try's answers are tested), and one whose re-tried answers run above its record gets a
 * larger, still bounded one; the pick says so in its evidence.
 */
const NOW = new Date('2025-01-10T12:00:00.000Z');
const HOUR = 3_600_000;

const yaml = (retry = '') => `
providers:
  p: { family: mock }
models:
  best: { provider: p, quality: 0.6 }
  weak: { provider: p, quality: 0.5 }
routes:
  - { name: learn, models: [auto], strategy: feedback_driven, targets: [p/best, p/weak] }
routing: { retry_starved: { after_requests: 500, after_seconds: 7200, share: 0.05, rising_share: 0.2${retry ? `, ${retry}` : ''} } }
`;

function setup(retry = '') {
  const stats = new FakeStats();
  const service = new RoutingService(makeConfig(yaml(retry)), stats, new FakeRegressions(), new FixedClock(NOW));
  // The favourite: well sampled and far above the other, so Thompson sampling alone never leaves it.
  stats.set({ orgId: 'acme', provider: 'p', model: 'best', n: 800, outcomeMean: 0.9, outcomeVar: 0.02, requests: 900, served: { lastAt: NOW, requestsSince: 0 } });
  const weak = (over: { served?: { lastAt: Date; requestsSince: number } | null; riseEvidence?: number; riseTesting?: boolean }) =>
    stats.set({ orgId: 'acme', provider: 'p', model: 'weak', n: 60, outcomeMean: 0.4, outcomeVar: 0.04, requests: 60, ...over });
  const route = (i: number, over: Partial<RoutingInput> = {}): RoutingDecision =>
    service.route(makeInput({ requestId: `req-${i}`, mode: 'live', random: seededRandom(1000 + i), ...over }));
  return { weak, route, stats };
}

/** Over n requests: how many picked `weak` first, and how many of the picks said they were a re-try (and why). */
function tally(route: (i: number) => RoutingDecision, n: number) {
  let weakFirst = 0;
  const retries: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const d = route(i);
    if (d.plan[0].model === 'weak') weakFirst++;
    const r = d.insight.evidence?.retry;
    if (r) retries[r] = (retries[r] ?? 0) + 1;
  }
  return { weakFirst, retries };
}

const N = 4000;
/** Three binomial standard deviations around share·N. */
const within = (count: number, share: number) => Math.abs(count - share * N) <= 3 * Math.sqrt(N * share * (1 - share));

describe('starved candidates re-tried', () => {
  it('a candidate served recently is left to Thompson sampling: never picked, no re-try', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: new Date(NOW.getTime() - 60_000), requestsSince: 20 } });
    expect(tally((i) => route(i), N)).toEqual({ weakFirst: 0, retries: {} });
  });

  it('starved by requests (none of the last after_requests): put first for `share` of the requests, and said so', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: new Date(NOW.getTime() - 60_000), requestsSince: 500 } });
    const t = tally((i) => route(i), N);
    expect(t.weakFirst).toBe(t.retries.starved);
    expect(Object.keys(t.retries)).toEqual(['starved']);
    expect(within(t.weakFirst, 0.05)).toBe(true);
  });

  it('starved by time (none for after_seconds): the same bounded share', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: new Date(NOW.getTime() - 2 * HOUR), requestsSince: 3 } });
    const t = tally((i) => route(i), N);
    expect(t.weakFirst).toBe(t.retries.starved);
    expect(within(t.weakFirst, 0.05)).toBe(true);
  });

  it('a rise being followed up: `rising_share` of the requests, whether or not the candidate is starved', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: NOW, requestsSince: 2 }, riseEvidence: 0.2 });
    const t = tally((i) => route(i), N);
    expect(Object.keys(t.retries)).toEqual(['rising']);
    expect(t.weakFirst).toBe(t.retries.rising);
    expect(within(t.weakFirst, 0.2)).toBe(true);
  });

  it('no follow-up for a rising candidate that Thompson sampling already reaches', () => {
    const { weak, route, stats } = setup();
    // Close to the favourite and thinly sampled: its own draws win now and then.
    stats.set({ orgId: 'acme', provider: 'p', model: 'weak', n: 30, outcomeMean: 0.9, outcomeVar: 0.04, requests: 30, served: { lastAt: NOW, requestsSince: 2 }, riseEvidence: 0.3 });
    void weak;
    const t = tally((i) => route(i), N);
    expect(t.retries).toEqual({});
    expect(t.weakFirst).toBeGreaterThan(0);
  });

  it('a rise statistic below the follow-up level is no reason to re-try', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: NOW, requestsSince: 2 }, riseEvidence: 0.04 });
    expect(tally((i) => route(i), N)).toEqual({ weakFirst: 0, retries: {} });
  });

  it('a re-try whose answers are being tested (held) with none yet, or leaning to "as before", is re-tried at `share` until the test decides, though it served just now', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: NOW, requestsSince: 1 }, riseEvidence: 0, riseTesting: true });
    const t = tally((i) => route(i), N);
    expect(Object.keys(t.retries)).toEqual(['starved']);
    expect(t.weakFirst).toBe(t.retries.starved);
    expect(within(t.weakFirst, 0.05)).toBe(true);
  });

  it('a held test whose answers lean to a rise is followed up at `rising_share`, however small its statistic', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: NOW, requestsSince: 1 }, riseEvidence: 0.01, riseTesting: true });
    const t = tally((i) => route(i), N);
    expect(Object.keys(t.retries)).toEqual(['rising']);
    expect(within(t.weakFirst, 0.2)).toBe(true);
  });

  it('a held test takes the starved turns before a candidate starved longer: its test ends first', () => {
    const { stats } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'weak', n: 60, outcomeMean: 0.4, outcomeVar: 0.04, requests: 60, served: { lastAt: NOW, requestsSince: 2 }, riseEvidence: 0, riseTesting: true });
    stats.set({ orgId: 'acme', provider: 'p', model: 'old', n: 60, outcomeMean: 0.3, outcomeVar: 0.04, requests: 60, served: { lastAt: NOW, requestsSince: 600 } });
    const service = new RoutingService(makeConfig(yaml().replace('targets: [p/best, p/weak]', 'targets: [p/best, p/weak, p/old]').replace('  weak: { provider: p, quality: 0.5 }', '  weak: { provider: p, quality: 0.5 }\n  old: { provider: p, quality: 0.5 }')), stats, new FakeRegressions(), new FixedClock(NOW));
    let weakFirst = 0;
    let oldFirst = 0;
    for (let i = 0; i < N; i++) {
      const d = service.route(makeInput({ requestId: `req-${i}`, mode: 'live', random: seededRandom(1000 + i) }));
      if (d.plan[0].model === 'weak') weakFirst++;
      if (d.plan[0].model === 'old') oldFirst++;
    }
    expect(oldFirst).toBe(0);
    expect(within(weakFirst, 0.05)).toBe(true);
    // For a gap at most: a held test that got no answer over after_requests requests is one starved candidate among the others, the longest starved first.
    stats.set({ orgId: 'acme', provider: 'p', model: 'weak', n: 60, outcomeMean: 0.4, outcomeVar: 0.04, requests: 60, served: { lastAt: NOW, requestsSince: 550 }, riseEvidence: 0, riseTesting: true });
    const later = tally((i) => service.route(makeInput({ requestId: `req-${i}`, mode: 'live', random: seededRandom(1000 + i) })), N);
    expect(within(later.retries.starved ?? 0, 0.05)).toBe(true);
    expect(later.weakFirst).toBe(0);
  });

  it('a rise being followed up does not take the starved candidate\'s turns: each has its own share', () => {
    const { stats } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'weak', n: 60, outcomeMean: 0.4, outcomeVar: 0.04, requests: 60, served: { lastAt: NOW, requestsSince: 2 }, riseEvidence: 0.2 });
    stats.set({ orgId: 'acme', provider: 'p', model: 'old', n: 60, outcomeMean: 0.3, outcomeVar: 0.04, requests: 60, served: { lastAt: NOW, requestsSince: 600 } });
    const service = new RoutingService(makeConfig(yaml().replace('targets: [p/best, p/weak]', 'targets: [p/best, p/weak, p/old]').replace('  weak: { provider: p, quality: 0.5 }', '  weak: { provider: p, quality: 0.5 }\n  old: { provider: p, quality: 0.5 }')), stats, new FakeRegressions(), new FixedClock(NOW));
    const t = tally((i) => service.route(makeInput({ requestId: `req-${i}`, mode: 'live', random: seededRandom(1000 + i) })), N);
    expect(within(t.retries.rising ?? 0, 0.2)).toBe(true);
    expect(within(t.retries.starved ?? 0, 0.05)).toBe(true);
  });

  it('never a candidate that has not served before (its wide prior already explores it), and never when switched off', () => {
    const unknown = setup();
    unknown.weak({ served: null });
    expect(tally((i) => unknown.route(i), 1000).retries).toEqual({});
    const off = setup('enabled: false');
    off.weak({ served: { lastAt: new Date(NOW.getTime() - 10 * HOUR), requestsSince: 10_000 }, riseEvidence: 0.9 });
    expect(tally((i) => off.route(i), N)).toEqual({ weakFirst: 0, retries: {} });
  });

  it('drawn from the request id: a dry run of the same request id makes the same re-try, and the live draws are left as they were', () => {
    const { weak, route } = setup();
    weak({ served: { lastAt: NOW, requestsSince: 800 } });
    const off = setup('enabled: false');
    off.weak({ served: { lastAt: NOW, requestsSince: 800 } });
    let seen = 0;
    for (let i = 0; i < 400; i++) {
      const live = route(i);
      const dry = route(i, { mode: 'dry-run' });
      expect([i, dry.plan[0], dry.insight.evidence?.retry]).toEqual([i, live.plan[0], live.insight.evidence?.retry]);
      if (live.insight.evidence?.retry) {
        seen++;
        // The evidence is the re-tried candidate's.
        expect(live.insight.evidence.samples).toBe(60);
      } else {
        // No re-try: the very decision the router makes without re-tries (same live draws).
        expect([i, live.plan]).toEqual([i, off.route(i).plan]);
      }
    }
    expect(seen).toBeGreaterThan(0);
  });
});
