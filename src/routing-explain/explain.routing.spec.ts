import { FakeRegressions, FakeStats, FixedClock, makeCaller, makeConfig, makeStats, silentLogger, UnusedSql } from '../../test/support/kit';
import { loadGatewayConfig } from '../config/gateway-config';
import type { ModelStats, StatsSnapshot } from '../learning/model-stats';
import { LimitsService } from '../limits/limits.service';
import { MonthlyUsageRepository } from '../limits/monthly-usage.repository';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import type { RegressionsView } from '../routing/regressions/regressions-view';
import { RoutingService } from '../routing/routing.service';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { RoutingExplainService } from './routing-explain.service';

/**
 * Explain over the real routing chain (firewall, feedback_driven, smart_cost, constraints) with a
 * seeded aggregates snapshot and regression record: the evidence is checked against values computed
 * by hand from the posterior of docs/architecture.md "One model of uncertainty" (n0 = 10, default
 * prior 0.5, no catalogue quality, no traffic
 * so the `auto` signal is absent and the observed mean is the outcome mean).
 */
const NOW = new Date('2026-03-04T12:00:00.000Z');
const MARKER = 'PROMPT-MARKER-ROUTING-SPEC-77c2';

const YAML = `
providers: { mock: { family: mock } }
models:
  a: { provider: mock, type: chat }
  b: { provider: mock, type: chat }
  c: { provider: mock, type: chat }
  cheap: { provider: mock, type: chat, cost: { input_per_mtok: 0.1, output_per_mtok: 0.2 } }
  pricey: { provider: mock, type: chat, cost: { input_per_mtok: 5, output_per_mtok: 15 } }
routes:
  - { name: learn, models: [learn], strategy: feedback_driven, targets: [mock/a, mock/b] }
  - { name: three, models: [three], strategy: feedback_driven, targets: [mock/a, mock/b, mock/c] }
  - { name: save, models: [save], strategy: smart_cost, targets: [mock/pricey, mock/cheap] }
  - { name: capped, models: [capped], strategy: ordered, targets: [mock/cheap, mock/pricey], constraints: { max_cost_increase: 0.5 } }
firewall: { rules: [ { id: no-secrets, pattern: "api[_-]?key", action: block } ] }
limits: { explain_per_minute_per_org: 1000, explain_per_minute_per_key: 1000 }
# Pinned, so the hand-computed values below do not move with the defaults.
routing: { n0: 10, n_min: 20, n_steady: 200, default_prior: 0.5, regressions: { penalty: 0.05, max_penalty: 0.2 } }
`;

const caller = makeCaller({ features: ['explain', 'feedback_routing'] });

/** Stats of acme's mock/`model`: no successful request unless `over` says so. */
const stats = (model: string, over: Partial<ModelStats> = {}): ModelStats =>
  makeStats({ orgId: 'acme', provider: 'mock', model, successRate: 0, requests: 0, computedAt: NOW, ...over });

/** A snapshot refreshed at NOW of acme's rows and the pool's; acme's sample total is theirs unless `orgTotal` says otherwise. */
function snapshotOf(own: ModelStats[], pooled: ModelStats[] = [], orgTotal?: number): FakeStats {
  const snapshot = new FakeStats(NOW);
  for (const row of [...own, ...pooled]) snapshot.set(row);
  return orgTotal === undefined ? snapshot : snapshot.samples('acme', orgTotal);
}

function explainer(snapshot?: StatsSnapshot, regressions?: RegressionsView) {
  const config = makeConfig(YAML);
  const routing = new RoutingService(config, snapshot, regressions, new FixedClock(NOW));
  const metrics = new MetricsService();
  const limits = new LimitsService(new MemoryCacheStore(), new MonthlyUsageRepository(new UnusedSql()), metrics, silentLogger(), new StoreFallback(metrics, silentLogger()), config);
  return new RoutingExplainService(routing, limits);
}

const ask = (service: RoutingExplainService, model: string, content = 'how do I reset my password?', acceptLanguage = 'en') =>
  service.explain({ caller, body: { request: { model, messages: [{ role: 'user', content: `${content} ${MARKER}` }] } }, acceptLanguage, requestId: 'req-fixed-1' });

const PARAMS = loadGatewayConfig(YAML, {}).routing;
const STEADY = { ...PARAMS.weights.steady };
const COLD = { ...PARAMS.weights.cold_start };

describe('explain over the real routing chain', () => {
  it('day zero: feedback_driven in cold start, confidence capped (cap_day0), evidence of nothing', async () => {
    const { body, locale } = await ask(explainer(), 'learn');
    expect(locale).toBe('en');
    expect(body).toMatchObject({
      dry_run: true,
      strategy_id: 'feedback_driven',
      phase: 'cold_start',
      weights: COLD,
      candidates: [
        { provider: 'mock', model: 'a', score: 0.5 },
        { provider: 'mock', model: 'b', score: 0.5 },
      ],
      filtered: [],
      would_select: { provider: 'mock', model: 'a' },
      reason: 'dispatched',
      confidence_reason: 'cap_day0',
      used_shared_pool_prior: false,
      evidence: { samples: 0, top2_score_gap: 0, outcome_variance: 0, recent_regressions: { kind: 'exact', exact: 0 }, last_regression_at: null },
      explanation: { template_id: 'cold_start' },
    });
    expect(body.confidence).toBeLessThanOrEqual(PARAMS.confidence_caps.day0);
  });

  it('steady with a clear winner: high confidence, evidence equal to the hand-computed posterior', async () => {
    const snapshot = snapshotOf([stats('a', { n: 400, outcomeMean: 0.9, outcomeVar: 0.01 }), stats('b', { n: 400, outcomeMean: 0.5, outcomeVar: 0.01 })]);
    const { body } = await ask(explainer(snapshot), 'learn');
    // score = (n0·prior + n·ȳ)/(n0 + n): a = (10·0.5 + 400·0.9)/410 = 365/410, b = (5 + 200)/410 = 0.5.
    expect(body.candidates[0]).toEqual({ provider: 'mock', model: 'a', score: expect.closeTo(365 / 410, 12) });
    expect(body.candidates[1]).toEqual({ provider: 'mock', model: 'b', score: expect.closeTo(0.5, 12) });
    expect(body).toMatchObject({ phase: 'steady', weights: STEADY, confidence_reason: 'ok', would_select: { provider: 'mock', model: 'a' } });
    expect(body.confidence).toBeGreaterThanOrEqual(0.99);
    expect(body.exploration_rate_effective).toBeLessThanOrEqual(0.01);
    expect(body.evidence).toEqual({
      samples: 400,
      top2_score_gap: expect.closeTo(160 / 410, 12),
      outcome_variance: 0.01,
      recent_regressions: { kind: 'exact', exact: 0 },
      last_regression_at: null,
    });
    expect(body.explanation.template_id).toBe('feedback_driven_high_confidence');
    expect(body.explanation.text).toContain('mock/a with high confidence (100%)');
    expect(body.explanation.text).toContain('over 400 samples');
  });

  it('regressions: bucketed count, last one rounded to 5 minutes, score lowered (capped penalty)', async () => {
    const snapshot = snapshotOf([stats('a', { n: 400, outcomeMean: 0.9, outcomeVar: 0.01 }), stats('b', { n: 400, outcomeMean: 0.5, outcomeVar: 0.01 })]);
    // 12 regressions in the last 7 days, newest 57 min 29 s ago: 11:02:31 rounds to 11:05.
    const dates = Array.from({ length: 12 }, (_, i) => new Date(Date.parse('2026-03-04T11:02:31.000Z') - i * 3_600_000));
    const { body } = await ask(explainer(snapshot, new FakeRegressions().add('acme', 'mock', 'a', ...dates)), 'learn');
    // 12 × 0.05 × (1 − age/7 d) > 0.2, so the penalty is max_penalty 0.2.
    expect(body.candidates[0]).toEqual({ provider: 'mock', model: 'a', score: expect.closeTo(365 / 410 - 0.2, 12) });
    expect(body.evidence).toMatchObject({
      samples: 400,
      top2_score_gap: expect.closeTo(160 / 410 - 0.2, 12),
      recent_regressions: { kind: 'at_least', at_least: 10 },
      last_regression_at: '2026-03-04T11:05:00.000Z',
    });
  });

  it('a close race between two: moderate confidence; among three: low', async () => {
    const two = snapshotOf([stats('a', { n: 300, outcomeMean: 0.62, outcomeVar: 0.2 }), stats('b', { n: 300, outcomeMean: 0.6, outcomeVar: 0.2 })]);
    const moderate = (await ask(explainer(two), 'learn')).body;
    expect(moderate.confidence).toBeGreaterThanOrEqual(0.5);
    expect(moderate.confidence).toBeLessThan(0.8);
    expect(moderate.explanation.template_id).toBe('feedback_driven_moderate_confidence');
    // Hand-computed gap: (5 + 300·0.62)/310 − (5 + 300·0.6)/310 = 6/310.
    expect(moderate.evidence!.top2_score_gap).toBeCloseTo(6 / 310, 12);

    const three = snapshotOf([
      stats('a', { n: 300, outcomeMean: 0.601, outcomeVar: 0.2 }),
      stats('b', { n: 300, outcomeMean: 0.6, outcomeVar: 0.2 }),
      stats('c', { n: 300, outcomeMean: 0.6, outcomeVar: 0.2 }),
    ]);
    const low = (await ask(explainer(three), 'three', 'x', 'pt-BR')).body;
    expect(low.confidence).toBeLessThan(0.5);
    expect(low.explanation.template_id).toBe('feedback_driven_low_confidence');
    expect(low.explanation.text).toMatch(/^A estratégia feedback_driven tende a mock\/a com baixa confiança/);
  });

  it('the cross-organisation pool as prior: shared_prior, capped (cap_shared)', async () => {
    const snapshot = snapshotOf(
      [stats('a', { n: 5, outcomeMean: 0.9, outcomeVar: 0.01 })],
      [stats('a', { orgId: '*', n: 100, outcomeMean: 0.8, outcomeVar: 0.02 })],
      50,
    );
    const { body } = await ask(explainer(snapshot), 'learn');
    // a: prior = pool's 0.8, score = (10·0.8 + 5·0.9)/15 = 12.5/15.
    expect(body.candidates[0]).toEqual({ provider: 'mock', model: 'a', score: expect.closeTo(12.5 / 15, 12) });
    expect(body).toMatchObject({ used_shared_pool_prior: true, confidence_reason: 'cap_shared', phase: 'cold_start', explanation: { template_id: 'shared_prior' } });
    expect(body.confidence).toBeLessThanOrEqual(PARAMS.confidence_caps.shared);
    expect(body.evidence!.samples).toBe(5);
  });

  it('smart_cost: the cheapest within tolerance of the best', async () => {
    const { body } = await ask(explainer(), 'save');
    expect(body).toMatchObject({ strategy_id: 'smart_cost', would_select: { provider: 'mock', model: 'cheap' }, explanation: { template_id: 'smart_cost_cheapest' } });
    expect(body.evidence).not.toBeNull();
  });

  it('max_cost_increase: the pricier target is filtered with its reason', async () => {
    const { body } = await ask(explainer(), 'capped');
    expect(body.candidates.map((c) => c.model)).toEqual(['cheap']);
    expect(body.filtered).toEqual([{ provider: 'mock', model: 'pricey', reason: 'constraint_max_cost_increase', score: expect.any(Number) }]);
    expect(body.would_select).toEqual({ provider: 'mock', model: 'cheap' });
  });

  it('firewall block: still an answer, with the contract shape and no prompt text', async () => {
    for (const locale of ['en', 'pt']) {
      const r = await ask(explainer(), 'learn', 'here is my api_key: sk-123', locale);
      expect(r.body).toMatchObject({
        candidates: [],
        filtered: [
          { provider: 'mock', model: 'a', reason: 'firewall_blocked', score: 0 },
          { provider: 'mock', model: 'b', reason: 'firewall_blocked', score: 0 },
        ],
        would_select: null,
        reason: 'no_enabled_targets',
        evidence: null,
        explanation: { template_id: 'firewall_blocked' },
      });
      expect(JSON.stringify(r.body)).not.toMatch(/sk-123|api_key:|PROMPT-MARKER/);
    }
  });

  it('never quotes the prompt, in any template', async () => {
    const snapshot = snapshotOf([stats('a', { n: 400, outcomeMean: 0.9, outcomeVar: 0.01 }), stats('b', { n: 40, outcomeMean: 0.5, outcomeVar: 0.01 })]);
    for (const model of ['learn', 'three', 'save', 'capped', 'a']) {
      for (const locale of ['en', 'pt']) {
        const r = await ask(explainer(snapshot), model, 'x', locale);
        expect(JSON.stringify(r.body)).not.toContain(MARKER);
        expect(Array.from(r.body.explanation.text).length).toBeLessThanOrEqual(600);
      }
    }
  });
});
