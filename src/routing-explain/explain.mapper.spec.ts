import { NO_ROUTER } from '../routing/routing.service';
import type { RoutingDecision, RoutingEvidence, RoutingInsight } from '../routing/routing.types';
import { LOCALES } from './accept-language';
import { MAX_TEXT_CHARS, TEMPLATE_IDS, TemplateId } from './explain-texts';
import { bucketRegressions, chooseTemplate, explainReason, roundToFiveMinutes, toExplainJson } from './explain.mapper';

const MARKER = 'PROMPT-MARKER-MAPPER-0b7e';

const evidence: RoutingEvidence = {
  samples: 240,
  top2ScoreGap: 0.125,
  outcomeVariance: 0.0431,
  recentRegressions: { kind: 'exact', exact: 2 },
  lastRegressionAt: '2026-03-04T10:07:31.000Z',
};

/** A feedback_driven decision with two candidates; overrides as needed (factory with overrides). */
function routed(insight: Partial<RoutingInsight> = {}, over: Partial<RoutingDecision> = {}): RoutingDecision {
  const candidates = over.candidates ?? [
    { provider: 'openai', model: 'gpt-4o-mini', score: 0.81 },
    { provider: 'anthropic', model: 'claude-haiku', score: 0.685 },
  ];
  return {
    requestedModel: 'auto',
    rule: { name: 'default', implicit: false },
    strategyId: 'feedback_driven',
    candidates,
    filtered: [],
    plan: candidates.map(({ provider, model }) => ({ provider, model })),
    messages: [{ role: 'user', content: `please route ${MARKER}` }],
    insight: {
      routerInvoked: true,
      phase: 'steady',
      weights: { session: 0.5, auto: 0.2, manual: 0.1, benchmark: 0.2 },
      confidence: 0.91,
      confidenceReason: 'ok',
      explorationRateEffective: 0.09,
      usedSharedPoolPrior: false,
      evidence,
      firewallBlocked: false,
      ...insight,
    },
    ...over,
  };
}

function ordered(over: Partial<RoutingDecision> = {}): RoutingDecision {
  const candidates = over.candidates ?? [
    { provider: 'mock', model: 'mock-fast', score: null },
    { provider: 'mock', model: 'mock-slow', score: null },
  ];
  return routed({}, { strategyId: 'ordered', candidates, plan: candidates.map(({ provider, model }) => ({ provider, model })), insight: NO_ROUTER, ...over });
}

describe('toExplainJson: the contract shape', () => {
  it('maps a feedback_driven decision field by field', () => {
    const json = toExplainJson(routed(), 'en');
    expect(json).toEqual({
      dry_run: true,
      strategy_id: 'feedback_driven',
      phase: 'steady',
      weights: { session: 0.5, auto: 0.2, manual: 0.1, benchmark: 0.2 },
      candidates: [
        { provider: 'openai', model: 'gpt-4o-mini', score: 0.81 },
        { provider: 'anthropic', model: 'claude-haiku', score: 0.685 },
      ],
      filtered: [],
      would_select: { provider: 'openai', model: 'gpt-4o-mini' },
      reason: 'dispatched',
      confidence: 0.91,
      confidence_reason: 'ok',
      exploration_rate_effective: 0.09,
      used_shared_pool_prior: false,
      evidence: {
        samples: 240,
        top2_score_gap: 0.125,
        outcome_variance: 0.0431,
        recent_regressions: { kind: 'exact', exact: 2 },
        last_regression_at: '2026-03-04T10:10:00.000Z',
      },
      explanation: {
        template_id: 'feedback_driven_high_confidence',
        text:
          'Strategy feedback_driven would select openai/gpt-4o-mini with high confidence (91%): it leads the runner-up by 0.125 in score over 240 samples (phase steady). Live traffic would explore other models 9% of the time.',
      },
    });
  });

  it('maps an ordered decision: no router, null evidence, scores from the order of preference', () => {
    const json = toExplainJson(ordered(), 'en');
    expect(json).toMatchObject({
      strategy_id: 'ordered',
      phase: null,
      weights: null,
      candidates: [
        { provider: 'mock', model: 'mock-fast', score: 1 },
        { provider: 'mock', model: 'mock-slow', score: 0.5 },
      ],
      would_select: { provider: 'mock', model: 'mock-fast' },
      reason: 'dispatched',
      confidence: null,
      confidence_reason: 'no_router_invoked',
      exploration_rate_effective: 0,
      used_shared_pool_prior: false,
      evidence: null,
      explanation: { template_id: 'no_router' },
    });
    for (const c of json.candidates) expect(typeof c.score).toBe('number');
  });

  it('evidence is null whenever no router was invoked, even if the decision carried some', () => {
    expect(toExplainJson(ordered({ insight: { ...NO_ROUTER, evidence } }), 'en').evidence).toBeNull();
  });

  it('never emits a non-finite number', () => {
    const json = toExplainJson(routed({ confidence: NaN, explorationRateEffective: Infinity, evidence: { ...evidence, top2ScoreGap: NaN } }), 'en');
    expect(json.confidence).toBeNull();
    expect(json.exploration_rate_effective).toBe(0);
    expect(json.evidence!.top2_score_gap).toBe(0);
  });
});

describe('reason and would_select', () => {
  it('dispatched: the plan has a first target', () => {
    const d = routed();
    expect(explainReason(d)).toBe('dispatched');
    expect(toExplainJson(d, 'en').would_select).toEqual({ provider: 'openai', model: 'gpt-4o-mini' });
  });

  it('exhausted: candidates existed but every one was filtered', () => {
    const d = routed(
      {},
      {
        candidates: [],
        plan: [],
        filtered: [
          { provider: 'openai', model: 'gpt-4o-mini', reason: 'breaker_open', score: 0.8 },
          { provider: 'anthropic', model: 'claude-haiku', reason: 'constraint_max_cost_increase', score: 0.7 },
        ],
      },
    );
    const json = toExplainJson(d, 'en');
    expect([json.reason, json.would_select, json.explanation.template_id]).toEqual(['exhausted', null, 'exhausted']);
    expect(json.filtered).toHaveLength(2);
  });

  it('no_enabled_targets: nothing considered and nothing filtered', () => {
    const json = toExplainJson(ordered({ candidates: [], plan: [] }), 'en');
    expect([json.reason, json.would_select, json.explanation.template_id]).toEqual(['no_enabled_targets', null, 'no_enabled_targets']);
  });

  it('firewall block: 200 shape with a firewall_blocked entry of score 0.0, would_select null, no_enabled_targets', () => {
    for (const d of [
      // The routing chain reports the block in the insight and in filtered…
      routed({ firewallBlocked: true }, { candidates: [], plan: [], filtered: [{ provider: 'openai', model: 'gpt-4o-mini', reason: 'firewall_blocked', score: 0 }] }),
      // …or only in the insight, with the candidates it would have tried: the mapper adds the entries.
      routed({ firewallBlocked: true }, { plan: [] }),
      routed({ firewallBlocked: true }),
    ]) {
      const json = toExplainJson(d, 'pt');
      expect(json.filtered).toContainEqual({ provider: 'openai', model: 'gpt-4o-mini', reason: 'firewall_blocked', score: 0 });
      expect(json.filtered.filter((f) => f.reason === 'firewall_blocked' && f.model === 'gpt-4o-mini')).toHaveLength(1);
      expect([json.would_select, json.reason, json.explanation.template_id]).toEqual([null, 'no_enabled_targets', 'firewall_blocked']);
      expect(json.candidates).toEqual([]);
    }
  });
});

describe('evidence fields', () => {
  it.each([
    [0, { kind: 'exact', exact: 0 }],
    [1, { kind: 'exact', exact: 1 }],
    [9, { kind: 'exact', exact: 9 }],
    [10, { kind: 'at_least', at_least: 10 }],
    [49, { kind: 'at_least', at_least: 10 }],
    [50, { kind: 'at_least', at_least: 50 }],
    [5000, { kind: 'at_least', at_least: 50 }],
  ])('recent_regressions for %i', (n, expected) => {
    expect(bucketRegressions(n)).toEqual(expected);
    // An exact count of 10 or more coming from the routing chain is re-bucketed, never leaked.
    const json = toExplainJson(routed({ evidence: { ...evidence, recentRegressions: { kind: 'exact', exact: n } } }), 'en');
    expect(json.evidence!.recent_regressions).toEqual(expected);
  });

  it.each([
    ['2026-03-04T10:02:29.999Z', '2026-03-04T10:00:00.000Z'],
    ['2026-03-04T10:02:30.000Z', '2026-03-04T10:05:00.000Z'],
    ['2026-03-04T10:05:00.000Z', '2026-03-04T10:05:00.000Z'],
    ['2026-03-04T23:58:00.000Z', '2026-03-05T00:00:00.000Z'],
  ])('last_regression_at %s → %s', (iso, rounded) => {
    expect(roundToFiveMinutes(iso)).toBe(rounded);
    expect(toExplainJson(routed({ evidence: { ...evidence, lastRegressionAt: iso } }), 'en').evidence!.last_regression_at).toBe(rounded);
  });

  it('last_regression_at is null when none', () => {
    expect(toExplainJson(routed({ evidence: { ...evidence, lastRegressionAt: null } }), 'en').evidence!.last_regression_at).toBeNull();
  });
});

describe('explanation templates', () => {
  const blocked = routed({ firewallBlocked: true }, { candidates: [], plan: [], filtered: [{ provider: 'openai', model: 'gpt-4o-mini', reason: 'firewall_blocked', score: 0 }] });
  const single = (strategyId: RoutingDecision['strategyId']) =>
    ordered({ strategyId, candidates: [{ provider: 'mock', model: 'mock-fast', score: null }], plan: [{ provider: 'mock', model: 'mock-fast' }] });
  const cases: Array<[TemplateId, RoutingDecision]> = [
    ['firewall_blocked', blocked],
    ['no_enabled_targets', ordered({ candidates: [], plan: [] })],
    ['exhausted', routed({}, { candidates: [], plan: [], filtered: [{ provider: 'openai', model: 'gpt-4o-mini', reason: 'breaker_open', score: 0.8 }] })],
    ['single_candidate', single('direct')],
    ['single_candidate', routed({ confidence: 1, confidenceReason: 'single_candidate' }, { candidates: [{ provider: 'openai', model: 'gpt-4o-mini', score: 0.8 }], plan: [{ provider: 'openai', model: 'gpt-4o-mini' }] })],
    ['no_router', ordered()],
    ['no_router', ordered({ strategyId: 'direct' })],
    ['weighted_draw', ordered({ strategyId: 'weighted', candidates: [{ provider: 'mock', model: 'mock-slow', score: 0.75 }, { provider: 'mock', model: 'mock-fast', score: 0.25 }], plan: [{ provider: 'mock', model: 'mock-slow' }, { provider: 'mock', model: 'mock-fast' }] })],
    ['smart_cost_cheapest', routed({ phase: null, weights: null, confidence: 0.7 }, { strategyId: 'smart_cost' })],
    ['cold_start', routed({ phase: 'cold_start', confidence: 0.3, confidenceReason: 'cap_day0', evidence: { ...evidence, samples: 0 } })],
    ['cold_start', routed({ phase: 'cold_start', confidence: 0.4, confidenceReason: 'insufficient_samples', evidence: { ...evidence, samples: 3 } })],
    ['shared_prior', routed({ phase: 'learning', confidence: 0.6, confidenceReason: 'cap_shared', usedSharedPoolPrior: true })],
    ['shared_prior', routed({ phase: 'cold_start', confidence: 0.5, confidenceReason: 'cap_day0', usedSharedPoolPrior: true, evidence: { ...evidence, samples: 0 } })],
    ['cold_start', routed({ phase: 'learning', confidence: 0.55, confidenceReason: 'insufficient_samples' })],
    ['feedback_driven_high_confidence', routed({ confidence: 0.8 })],
    ['feedback_driven_moderate_confidence', routed({ confidence: 0.79 })],
    ['feedback_driven_moderate_confidence', routed({ confidence: 0.5, phase: 'learning' })],
    ['feedback_driven_low_confidence', routed({ confidence: 0.49 })],
  ];

  it('the table covers every id of the closed enum', () => {
    expect(new Set(cases.map(([id]) => id))).toEqual(new Set(TEMPLATE_IDS));
  });

  it.each(cases)('%s: chosen, rendered in en and pt, within the cap, no prompt content', (id, d) => {
    expect(chooseTemplate(d)).toBe(id);
    const en = toExplainJson(d, 'en');
    const pt = toExplainJson(d, 'pt');
    expect(en.explanation.template_id).toBe(id);
    expect(pt.explanation.template_id).toBe(id);
    for (const json of [en, pt]) {
      expect(json.explanation.text.length).toBeGreaterThan(40);
      expect(Array.from(json.explanation.text).length).toBeLessThanOrEqual(MAX_TEXT_CHARS);
      expect(JSON.stringify(json)).not.toContain(MARKER);
      expect(json.explanation.text).not.toMatch(/undefined|NaN|\[object/);
    }
    expect(pt.explanation.text).not.toBe(en.explanation.text);
    // Everything but the text is locale-independent.
    expect({ ...pt, explanation: null }).toEqual({ ...en, explanation: null });
  });

  it('pt texts are Portuguese and format numbers the Brazilian way', () => {
    const d = routed({ confidence: 0.82 });
    expect(toExplainJson(d, 'en').explanation.text).toContain('by 0.125 in score over 240 samples');
    expect(toExplainJson(d, 'pt').explanation.text).toBe(
      'A estratégia feedback_driven selecionaria openai/gpt-4o-mini com alta confiança (82%): ele supera o segundo colocado em 0,125 de pontuação ao longo de 240 amostras (fase estável). O tráfego real exploraria outros modelos em 9% das vezes.',
    );
  });

  it('caps the text at 600 characters even with very long configured ids', () => {
    const long = 'm'.repeat(900);
    for (const d of [
      routed({}, { candidates: [{ provider: 'p'.repeat(300), model: long, score: 0.9 }, { provider: 'x', model: 'y', score: 0.1 }], plan: [{ provider: 'p'.repeat(300), model: long }] }),
      ordered({ candidates: [{ provider: 'mock', model: long, score: null }, { provider: 'mock', model: 'b', score: null }], plan: [{ provider: 'mock', model: long }] }),
    ]) {
      for (const locale of LOCALES) {
        const text = toExplainJson(d, locale).explanation.text;
        expect(Array.from(text)).toHaveLength(MAX_TEXT_CHARS);
        expect(text.endsWith('…')).toBe(true);
      }
    }
  });
});

describe('a detected change and a re-try (README "Drift: change detection")', () => {
  const change = { direction: 'drop' as const, since: '2026-03-04T09:41:10.000Z', detectedAt: '2026-03-04T10:12:00.000Z' };

  it('evidence carries the change, rounded to 5 minutes, and the text says it in en and pt; nothing is added without one', () => {
    const d = routed({ evidence: { ...evidence, lastChange: change } });
    const en = toExplainJson(d, 'en');
    const pt = toExplainJson(d, 'pt');
    expect(en.evidence!.last_change).toEqual({ direction: 'drop', since: '2026-03-04T09:40:00.000Z', detected_at: '2026-03-04T10:10:00.000Z' });
    expect(en.explanation.template_id).toBe('feedback_driven_high_confidence');
    expect(en.explanation.text).toContain('A change was detected: the quality of openai/gpt-4o-mini dropped around 2026-03-04 09:40 UTC');
    expect(pt.explanation.text).toContain('Uma mudança foi detectada: a qualidade de openai/gpt-4o-mini caiu por volta de 2026-03-04 09:40 UTC');
    const rise = toExplainJson(routed({ evidence: { ...evidence, lastChange: { ...change, direction: 'rise' } } }), 'pt');
    expect(rise.explanation.text).toContain('subiu por volta de');
    const plain = toExplainJson(routed(), 'en');
    expect(Object.keys(plain.evidence!)).toEqual(['samples', 'top2_score_gap', 'outcome_variance', 'recent_regressions', 'last_regression_at']);
    expect(plain.explanation.text).not.toContain('change');
  });

  it('a re-try of a starved or rising model: evidence.retry and a sentence in en and pt, within the 600-character cap', () => {
    for (const retry of ['starved', 'rising'] as const) {
      const d = routed({ evidence: { ...evidence, retry, lastChange: change } });
      const en = toExplainJson(d, 'en');
      const pt = toExplainJson(d, 'pt');
      expect(en.evidence!.retry).toBe(retry);
      expect(en.explanation.text).toContain('This pick is a re-try');
      expect(pt.explanation.text).toContain('Esta escolha é uma nova tentativa');
      for (const j of [en, pt]) expect(Array.from(j.explanation.text).length).toBeLessThanOrEqual(MAX_TEXT_CHARS);
      expect({ ...pt, explanation: null }).toEqual({ ...en, explanation: null });
    }
    expect(toExplainJson(routed({ evidence: { ...evidence, retry: 'starved' } }), 'en').explanation.text).toContain('had been starved of traffic');
    expect(toExplainJson(routed({ evidence: { ...evidence, retry: 'rising' } }), 'en').explanation.text).toContain('being tested against its record for a rise');
    expect(toExplainJson(routed({ evidence: { ...evidence, retry: 'rising' } }), 'pt').explanation.text).toContain('testadas contra o seu histórico');
  });
});
