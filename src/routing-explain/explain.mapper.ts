import type { TargetRef } from '../config/gateway-config';
import type { ConfidenceReason, FilterReason, Phase, RoutingDecision, RoutingEvidence, RoutingInsight } from '../routing/routing.types';
import type { Locale } from './accept-language';
import { renderExplanation, TemplateId } from './explain-texts';

/** Contract "Explain response" `reason`. */
export type ExplainReason = 'dispatched' | 'exhausted' | 'no_enabled_targets';

export type RecentRegressionsJson = { kind: 'exact'; exact: number } | { kind: 'at_least'; at_least: 10 | 50 };

export interface EvidenceJson {
  samples: number;
  top2_score_gap: number;
  outcome_variance: number;
  recent_regressions: RecentRegressionsJson;
  last_regression_at: string | null;
  /**
   * Ours, beside the contract's fields (docs/api.md "POST /v1/routing/explain"): the latest change the
   * change detector found for the winner in the last 7 days; present only when there is one.
   */
  last_change?: { direction: 'drop' | 'rise'; since: string; detected_at: string };
  /** Ours: present only when the pick is a re-try (`starved` or `rising`, routing.retry_starved). */
  retry?: 'starved' | 'rising';
}

/** Contract "Explain response": one place decides the field names. */
export interface ExplainResponseJson {
  dry_run: true;
  strategy_id: string;
  phase: Phase | null;
  weights: { session: number; auto: number; manual: number; benchmark: number } | null;
  candidates: Array<{ provider: string; model: string; score: number }>;
  filtered: Array<{ provider: string; model: string; reason: FilterReason; score: number }>;
  would_select: { provider: string; model: string } | null;
  reason: ExplainReason;
  confidence: number | null;
  confidence_reason: ConfidenceReason | null;
  exploration_rate_effective: number;
  used_shared_pool_prior: boolean;
  evidence: EvidenceJson | null;
  explanation: { text: string; template_id: TemplateId };
}

const FIVE_MINUTES_MS = 5 * 60_000;
const finite = (n: number, fallback = 0) => (Number.isFinite(n) ? n : fallback);
const pair = (t: TargetRef) => ({ provider: t.provider, model: t.model });
const same = (a: TargetRef, b: TargetRef) => a.provider === b.provider && a.model === b.model;

/**
 * `reason` (the contract names the values, not the rules; these are ours):
 *   - `no_enabled_targets`: the firewall blocked the request (docs/api.md "POST /v1/routing/explain"), or the rule
 *     left no candidate at all (nothing was considered and nothing filtered);
 *   - `exhausted`: there were candidates, but every one was filtered (constraints, open breakers),
 *     so dispatch would have nothing to try;
 *   - `dispatched`: dispatch would try `would_select` first.
 */
export function explainReason(d: RoutingDecision): ExplainReason {
  if (d.insight.firewallBlocked) return 'no_enabled_targets';
  if (d.plan.length > 0) return 'dispatched';
  return d.candidates.length === 0 && d.filtered.length === 0 ? 'no_enabled_targets' : 'exhausted';
}

/** The evidence's regression count as the contract's tagged union: exact below 10, else the 10 or 50 threshold reached. */
export function bucketRegressions(n: number): RecentRegressionsJson {
  const count = Math.max(0, Math.floor(finite(n)));
  if (count < 10) return { kind: 'exact', exact: count };
  return { kind: 'at_least', at_least: count >= 50 ? 50 : 10 };
}

/** Contract "Limits": last_regression_at is rounded to the nearest multiple of 5 minutes. */
export function roundToFiveMinutes(iso: string | null): string | null {
  if (iso === null) return null;
  const ms = Date.parse(iso);
  if (!Number.isFinite(ms)) return null;
  return new Date(Math.round(ms / FIVE_MINUTES_MS) * FIVE_MINUTES_MS).toISOString();
}

function evidenceJson(insight: RoutingInsight): EvidenceJson | null {
  // Contract: null when no router was invoked.
  const e: RoutingEvidence | null = insight.routerInvoked ? insight.evidence : null;
  if (e === null) return null;
  const r = e.recentRegressions;
  const json: EvidenceJson = {
    samples: Math.max(0, Math.floor(finite(e.samples))),
    top2_score_gap: finite(e.top2ScoreGap),
    outcome_variance: finite(e.outcomeVariance),
    // Re-bucketed defensively: an exact count of 10 or more must not leak through.
    recent_regressions: r.kind === 'exact' ? bucketRegressions(r.exact) : { kind: 'at_least', at_least: r.at_least >= 50 ? 50 : 10 },
    last_regression_at: roundToFiveMinutes(e.lastRegressionAt),
  };
  // Only when there is something to say, so the contract's shape is unchanged otherwise.
  const change = e.lastChange;
  const since = change ? roundToFiveMinutes(change.since) : null;
  const detectedAt = change ? roundToFiveMinutes(change.detectedAt) : null;
  if (change && since !== null && detectedAt !== null) json.last_change = { direction: change.direction, since, detected_at: detectedAt };
  if (e.retry) json.retry = e.retry;
  return json;
}

/**
 * The explanation template for a decision; the first rule that holds wins. Blocked, empty and
 * exhausted decisions first (nothing would be dispatched), then a lone candidate, then by strategy:
 * non-routers (direct, ordered; weighted), smart_cost, and feedback_driven by its confidence —
 * the shared-pool prior, cold start (no samples for the organisation, the winner below n_min, or
 * the cold_start phase), then confidence ≥ 0.8 high, ≥ 0.5 moderate, else low.
 */
export function chooseTemplate(d: RoutingDecision): TemplateId {
  const i = d.insight;
  if (i.firewallBlocked) return 'firewall_blocked';
  const reason = explainReason(d);
  if (reason === 'no_enabled_targets') return 'no_enabled_targets';
  if (reason === 'exhausted') return 'exhausted';
  if (d.candidates.length === 1 || i.confidenceReason === 'single_candidate') return 'single_candidate';
  if (!i.routerInvoked) return d.strategyId === 'weighted' ? 'weighted_draw' : 'no_router';
  if (d.strategyId === 'smart_cost') return 'smart_cost_cheapest';
  // The pool prior is only borrowed below n_min, so it comes before the cold-start rule that would hide it.
  if (i.usedSharedPoolPrior || i.confidenceReason === 'cap_shared') return 'shared_prior';
  if (i.confidenceReason === 'cap_day0' || i.confidenceReason === 'insufficient_samples' || i.phase === 'cold_start') return 'cold_start';
  const c = i.confidence ?? 0;
  if (c >= 0.8) return 'feedback_driven_high_confidence';
  if (c >= 0.5) return 'feedback_driven_moderate_confidence';
  return 'feedback_driven_low_confidence';
}

/**
 * Strategies that do not score (direct, ordered) report null scores; the contract's `score` is a
 * number, so those candidates are given their order of preference instead: (n − i) / n for the
 * i-th of n (1 for the first), so the higher score is still the earlier choice.
 */
function candidateScores(d: RoutingDecision): number[] {
  const n = d.candidates.length;
  return d.candidates.map((c, i) => (c.score === null ? (n - i) / n : finite(c.score)));
}

/**
 * RoutingDecision (dry-run) → the contract's Explain response. Only the decision's ids and numbers
 * are read: the request's messages are never looked at, so nothing here can echo prompt content.
 */
export function toExplainJson(d: RoutingDecision, locale: Locale): ExplainResponseJson {
  const i = d.insight;
  const filtered = d.filtered.map((f) => ({ ...pair(f), reason: f.reason, score: finite(f.score) }));
  const scores = candidateScores(d);
  let candidates = d.candidates.map((c, k) => ({ ...pair(c), score: scores[k] }));
  if (i.firewallBlocked) {
    // Contract "Firewall block": whatever would have run is removed, as `firewall_blocked` with score 0.0.
    for (const c of candidates) {
      if (!filtered.some((f) => f.reason === 'firewall_blocked' && same(f, c))) filtered.push({ ...pair(c), reason: 'firewall_blocked', score: 0 });
    }
    candidates = [];
  }
  const reason = explainReason(d);
  const selected = reason === 'dispatched' ? d.plan[0] : undefined;
  const selectedScore = selected ? (candidates.find((c) => same(c, selected))?.score ?? null) : null;
  const evidence = evidenceJson(i);
  const confidence = i.confidence !== null && Number.isFinite(i.confidence) ? i.confidence : null;
  const templateId = chooseTemplate(d);
  const text = renderExplanation(
    templateId,
    {
      provider: selected?.provider ?? null,
      model: selected?.model ?? null,
      strategy: d.strategyId,
      candidates: d.candidates.length,
      filtered: filtered.length,
      score: selectedScore,
      confidence,
      samples: evidence?.samples ?? null,
      top2Gap: evidence?.top2_score_gap ?? null,
      explorationRate: finite(i.explorationRateEffective),
      phase: i.phase,
      change: selected && evidence?.last_change ? { direction: evidence.last_change.direction, since: evidence.last_change.since } : null,
      retry: selected ? (evidence?.retry ?? null) : null,
    },
    locale,
  );
  return {
    dry_run: true,
    strategy_id: d.strategyId,
    phase: i.phase,
    weights: i.weights ? { session: i.weights.session, auto: i.weights.auto, manual: i.weights.manual, benchmark: i.weights.benchmark } : null,
    candidates,
    filtered,
    would_select: selected ? pair(selected) : null,
    reason,
    confidence,
    confidence_reason: i.confidenceReason,
    exploration_rate_effective: finite(i.explorationRateEffective),
    used_shared_pool_prior: i.usedSharedPoolPrior,
    evidence,
    explanation: { text, template_id: templateId },
  };
}
