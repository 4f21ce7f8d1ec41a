import { ConfigError } from '../config/schema';
import { GatewayError } from '../common/errors/gateway-error';
import { loadGatewayConfig } from '../config/gateway-config';
import { RoutingService } from './routing.service';
import type { RoutingInput, RoutingMode } from './routing.types';
import { MetricsService } from '../metrics/metrics.service';
import { CircuitBreakerService } from '../resilience/circuit-breaker/circuit-breaker.service';
import { StoreFallback } from '../resilience/store-fallback';
import { FakeStats, makeConfig, makeInput, ManualClock, seededRandom, silentLogger, SwitchableCache } from '../../test/support/kit';

const MARKER = 'ZQX-PROMPT-MARKER-4242';

const YAML = `
providers:
  p: { family: mock }
  q: { family: mock }
models:
  a: { provider: p, quality: 0.7 }
  b: { provider: q, quality: 0.6 }
routes:
  - { name: main, models: [auto], strategy: feedback_driven, targets: [p/a, q/b] }
  - { name: support, models: [help], strategy: ordered, targets: [q/b], template: helper }
templates:
  helper: { system: "You help {{customer}}." }
firewall:
  rules:
    - { id: secrets, pattern: "(?i)api[_-]?key\\\\s*[:=]", action: block }
    - { id: emails, pattern: "[\\\\w.+-]+@[\\\\w-]+\\\\.[a-z]+", action: redact, replacement: "<email>" }
    - { id: no-refunds, pattern: "(?i)refund", action: block, routes: [support] }
`;

describe('RoutingService: the chain (rule → template → firewall → constraints → strategy)', () => {
  const service = new RoutingService(makeConfig(YAML), new FakeStats());
  const route = (o: Partial<RoutingInput>) => service.route(makeInput(o));

  describe.each<RoutingMode>(['live', 'dry-run'])('in %s mode', (mode) => {
    it('a block gives the firewall shape: every candidate filtered as firewall_blocked with score 0, nothing to send, no router', () => {
      const d = route({ mode, model: 'auto,help', messages: [{ role: 'user', content: `${MARKER} here is my api_key = 123` }] });
      expect(d.insight).toMatchObject({ firewallBlocked: true, routerInvoked: false, confidence: null, confidenceReason: 'no_router_invoked', evidence: null });
      expect(d.candidates).toEqual([]);
      expect(d.plan).toEqual([]);
      expect(d.messages).toEqual([]);
      expect(d.filtered).toEqual([
        { provider: 'p', model: 'a', reason: 'firewall_blocked', score: 0 },
        { provider: 'q', model: 'b', reason: 'firewall_blocked', score: 0 },
      ]);
      expect(d.firewall).toEqual({ blockedBy: 'secrets', redactedBy: [] });
      expect(d.strategyId).toBe('feedback_driven');
      expect(JSON.stringify(d)).not.toContain(MARKER);
    });

    it('redacts before the messages are forwarded, template messages included', () => {
      const d = route({
        mode,
        model: 'help',
        inputs: { customer: 'ana@example.com' },
        messages: [{ role: 'user', content: `${MARKER} write to bob@example.org` }],
      });
      expect(d.messages).toEqual([
        { role: 'system', content: 'You help <email>.' },
        { role: 'user', content: `${MARKER} write to <email>` },
      ]);
      expect(d.firewall).toEqual({ blockedBy: null, redactedBy: ['emails'] });
      expect(d.plan).toEqual([{ provider: 'q', model: 'b' }]);
      expect(d.insight.firewallBlocked).toBe(false);
    });

    it('applies a route-scoped rule on its route only', () => {
      const messages = [{ role: 'user' as const, content: 'I want a refund' }];
      expect(route({ mode, model: 'auto', messages }).insight.firewallBlocked).toBe(false);
      expect(route({ mode, model: 'help', inputs: { customer: 'Ana' }, messages }).firewall?.blockedBy).toBe('no-refunds');
      expect(route({ mode, model: 'auto,help', messages }).firewall?.blockedBy).toBe('no-refunds');
    });
  });

  it('runs the firewall after templates, so a template input can be blocked', () => {
    const d = route({ model: 'help', inputs: { customer: 'apikey: 1' }, messages: [{ role: 'user', content: 'hi' }] });
    expect(d.firewall?.blockedBy).toBe('secrets');
  });

  it('blocks an implicit rule (bare catalogue id) with the global rules, and reports the direct strategy', () => {
    const d = route({ model: 'a', messages: [{ role: 'user', content: 'API-KEY=1' }] });
    expect(d.strategyId).toBe('direct');
    expect(d.filtered).toEqual([{ provider: 'p', model: 'a', reason: 'firewall_blocked', score: 0 }]);
  });

  it('leaves non-routers reporting no_router_invoked, and a comma list takes the first part\'s router insight', () => {
    expect(route({ model: 'help', inputs: { customer: 'Ana' } }).insight).toMatchObject({ routerInvoked: false, confidenceReason: 'no_router_invoked' });
    const d = route({ model: 'auto,help' });
    expect(d.insight).toMatchObject({ routerInvoked: true, phase: 'cold_start', confidenceReason: 'cap_day0' });
    expect(d.plan).toEqual([{ provider: 'p', model: 'a' }, { provider: 'q', model: 'b' }]);
    expect(route({ model: 'help,auto', inputs: { customer: 'Ana' } }).insight.routerInvoked).toBe(false);
  });

  it('keeps an unknown model a 404 model_not_found (explain maps it to no_route)', () => {
    expect(() => route({ model: 'nope' })).toThrow(GatewayError);
  });

  it('is refused at start-up, with the rule path, when a firewall pattern is outside the linear-time language', () => {
    expect(() => loadGatewayConfig(`firewall: { rules: [ { id: x, pattern: "(a)\\\\1", action: block } ] }`, {})).toThrow(
      /^firewall\.rules\.0\.pattern: invalid regular expression for the firewall's linear-time matcher: a backreference/,
    );
    // RoutingService compiles the rules itself too (a config built without the loader's check).
    const cfg = makeConfig('');
    const bad = { ...cfg, gateway: { ...cfg.gateway, firewall: { rules: [{ id: 'x', pattern: '(?=a)', action: 'block' as const }] } } };
    expect(() => new RoutingService(bad)).toThrow(ConfigError);
  });
});

/*
 * Step 4 of docs/architecture.md "The routing chain" with the real breaker service (on an
 * in-process store, with a clock the test
 * moves) as routing's BreakerView. Day-zero scores are the catalogue priors: a .8, b .7, c .6.
 */
describe('RoutingService: candidates minus open breakers', () => {
  const BREAKER_YAML = `
providers:
  p: { family: mock }
  q: { family: mock }
  r: { family: mock }
models:
  a: { provider: p, quality: 0.8, cost: { input_per_mtok: 1, output_per_mtok: 1 } }
  b: { provider: q, quality: 0.7, cost: { input_per_mtok: 1, output_per_mtok: 1 } }
  c: { provider: r, quality: 0.6, cost: { input_per_mtok: 100, output_per_mtok: 100 } }
routes:
  - { name: learn, models: [auto], strategy: feedback_driven, targets: [p/a, q/b, r/c] }
  - { name: list, models: [list], strategy: ordered, targets: [p/a, q/b, r/c] }
  - { name: capped, models: [capped], strategy: ordered, targets: [p/a, q/b, r/c], constraints: { max_cost_increase: 0.5 } }
`;
  const T0 = 1_750_000_000_000;

  const stores: SwitchableCache[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
  });

  function setup() {
    const config = makeConfig(BREAKER_YAML);
    const clock = new ManualClock(T0);
    // Counts its calls, to show that routing never makes one.
    const store = new SwitchableCache({ now: clock.now });
    stores.push(store);
    // random 0.5: no jitter, so the first open period is exactly 5 s.
    const metrics = new MetricsService();
    const breakers = new CircuitBreakerService(store, metrics, silentLogger(), new StoreFallback(metrics, silentLogger()), config, { now: clock.now, random: () => 0.5 });
    const service = new RoutingService(config, new FakeStats(), undefined, undefined, breakers);
    const open = async (provider: string) => {
      for (let i = 0; i < 5; i++) await breakers.record(provider, false, false);
    };
    const route = (o: Partial<RoutingInput>) => service.route(makeInput(o));
    return { clock, store, breakers, open, route, scoreWhenClosed: (model: string, o: Partial<RoutingInput>) => route({ ...o, mode: 'dry-run' }).candidates.find((c) => c.model === model)?.score };
  }

  describe.each<RoutingMode>(['live', 'dry-run'])('in %s mode', (mode) => {
    it('lists an open-breaker target as filtered breaker_open with its score, and the strategy chooses among the rest', async () => {
      const s = setup();
      const score = s.scoreWhenClosed('a', { model: 'auto' });
      expect(score).toBeCloseTo(0.8, 12);
      await s.open('p');
      const d = s.route({ mode, model: 'auto', random: seededRandom(7) });
      expect(d.filtered).toEqual([{ provider: 'p', model: 'a', reason: 'breaker_open', score }]);
      expect(d.candidates.map((c) => c.model).sort()).toEqual(['b', 'c']);
      expect(d.plan.map((t) => t.model).sort()).toEqual(['b', 'c']);
      expect(d.insight).toMatchObject({ routerInvoked: true });
      // A learning route has no listed primary: losing its first target is no fallback.
      expect(d.breakerOpen).toEqual({ primary: false, retryAfterMs: 5_000 });
      if (mode === 'dry-run') expect(d.plan[0]).toEqual({ provider: 'q', model: 'b' });
    });

    it('takes the target back once its open time is over (half-open: dispatch decides the probe)', async () => {
      const s = setup();
      await s.open('p');
      s.clock.t += 4_999;
      expect(s.route({ mode, model: 'list' }).breakerOpen).toEqual({ primary: true, retryAfterMs: 1 });
      s.clock.t += 1;
      const d = s.route({ mode, model: 'list' });
      expect(d.filtered).toEqual([]);
      expect(d.plan).toEqual([{ provider: 'p', model: 'a' }, { provider: 'q', model: 'b' }, { provider: 'r', model: 'c' }]);
      expect(d.breakerOpen).toBeUndefined();
    });

    it('leaves an empty plan when every target is open: all filtered, no router, the earliest reopening', async () => {
      const s = setup();
      await s.open('q');
      s.clock.t += 1_000;
      await s.open('p');
      await s.open('r');
      const d = s.route({ mode, model: 'auto' });
      expect(d.candidates).toEqual([]);
      expect(d.plan).toEqual([]);
      expect(d.filtered.map((f) => [f.model, f.reason])).toEqual([['a', 'breaker_open'], ['b', 'breaker_open'], ['c', 'breaker_open']]);
      for (const f of d.filtered) expect(f.score).toBeGreaterThan(0);
      expect(d.insight).toMatchObject({ routerInvoked: false, confidence: null, confidenceReason: 'no_router_invoked', firewallBlocked: false });
      expect(d.breakerOpen).toEqual({ primary: false, retryAfterMs: 4_000 });
      expect(s.route({ mode, model: 'list' }).breakerOpen).toEqual({ primary: true, retryAfterMs: 4_000 });
    });

    it('filters breakers before constraints, each target once, and keeps the constraint\'s reference the route\'s first target', async () => {
      const s = setup();
      await s.open('p');
      const d = s.route({ mode, model: 'capped' });
      // c costs 100 × a: over the ceiling set by a (the first target) although a itself is out.
      expect(d.filtered).toEqual([
        { provider: 'p', model: 'a', reason: 'breaker_open', score: 0 },
        { provider: 'r', model: 'c', reason: 'constraint_max_cost_increase', score: 0 },
      ]);
      expect(d.plan).toEqual([{ provider: 'q', model: 'b' }]);
    });

    it('marks the primary only when the first target of the first rule is out; a comma list falls to its next entry', async () => {
      const s = setup();
      await s.open('q');
      expect(s.route({ mode, model: 'list' }).breakerOpen).toEqual({ primary: false, retryAfterMs: 5_000 });
      const d = s.route({ mode, model: 'b,a' });
      expect(d.plan).toEqual([{ provider: 'p', model: 'a' }]);
      expect(d.filtered).toEqual([{ provider: 'q', model: 'b', reason: 'breaker_open', score: 0 }]);
      expect(d.breakerOpen?.primary).toBe(true);
    });

    it('reads the view only: no store call, nothing changed', async () => {
      const s = setup();
      await s.open('p');
      const calls = s.store.calls;
      s.route({ mode, model: 'auto' });
      s.route({ mode, model: 'list,b' });
      expect(s.store.calls).toBe(calls);
      expect(await s.breakers.acquire('p')).toBe('reject');
    });
  });

  it('gives live and dry-run the same candidates, filtered entries and plan (ordered)', async () => {
    const s = setup();
    await s.open('q');
    const live = s.route({ mode: 'live', model: 'list' });
    const dry = s.route({ mode: 'dry-run', model: 'list' });
    expect([live.candidates, live.filtered, live.plan, live.breakerOpen]).toEqual([dry.candidates, dry.filtered, dry.plan, dry.breakerOpen]);
  });

  it('filters nothing without a breaker view', () => {
    const service = new RoutingService(makeConfig(BREAKER_YAML), new FakeStats());
    const d = service.route(makeInput({ model: 'list' }));
    expect(d.plan).toHaveLength(3);
    expect(d.breakerOpen).toBeUndefined();
  });
});
