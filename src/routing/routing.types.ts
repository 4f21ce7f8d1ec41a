import type { RouteSpec, TargetRef } from '../config/gateway-config';
import type { StrategyId } from '../config/gateway-config.schema';
import type { ChatMessage } from '../providers/provider-adapter';
import type { Caller } from '../common/http/request-context';

export type RoutingMode = 'live' | 'dry-run';

export interface RoutingInput {
  caller: Caller;
  /** The client's `model`: catalogue id, provider/model, route alias, or a comma list of those. */
  model: string;
  messages: ChatMessage[];
  inputs?: Record<string, string | number | boolean>;
  /** The request's `max_completion_tokens` (or `max_tokens`): the output side of smart_cost's cost estimate. */
  maxCompletionTokens?: number;
  /** Explain's `headers` map, already sanitised (contract: reserved keys dropped before routing sees it). */
  headers?: Record<string, string>;
  sessionId: string | null;
  requestId: string;
  mode: RoutingMode;
  /** Random source for strategies that draw (weighted, Thompson sampling); seeded in tests. */
  random?: () => number;
}

export interface Candidate extends TargetRef {
  /** The strategy's score; null where the strategy does not score (direct, ordered). */
  score: number | null;
}

export type FilterReason = 'constraint_max_cost_increase' | 'firewall_blocked' | 'breaker_open' | 'unsupported_request';

export interface FilteredCandidate extends TargetRef {
  reason: FilterReason;
  score: number;
}

export interface RoutingDecision {
  requestedModel: string;
  /** The rule that applied: a configured route, or the implicit single-target rule of a catalogue id. */
  rule: { name: string; implicit: boolean; route?: RouteSpec };
  strategyId: StrategyId;
  candidates: Candidate[];
  filtered: FilteredCandidate[];
  /** Targets in the order dispatch tries them (each at most once). */
  plan: TargetRef[];
  /** The messages to send: template messages first, placeholders filled (and redacted by the firewall). */
  messages: ChatMessage[];
  /** What the router knew and how sure it is (explain; the learning strategies fill these). */
  insight: RoutingInsight;
  /** Which firewall rules acted (ids only, never the text that matched); always set by RoutingService. */
  firewall?: { blockedBy: string | null; redactedBy: string[] };
  /**
   * Set when targets were left out because their circuit breaker is open (docs/architecture.md "The routing chain", step 4).
   * `primary`: the first target of the first rule was one of them and that rule orders its targets as
   * listed (direct, ordered), so whatever serves is a fallback (Gateway-Fallback-Used). `retryAfterMs`: until the first of their open periods ends.
   */
  breakerOpen?: { primary: boolean; retryAfterMs: number };
}

export type ConfidenceReason = 'ok' | 'cap_day0' | 'cap_shared' | 'no_router_invoked' | 'insufficient_samples' | 'single_candidate';
export type Phase = 'cold_start' | 'learning' | 'steady';

/** Contract "Explain response": the inputs behind the confidence number. */
export interface RoutingEvidence {
  samples: number;
  top2ScoreGap: number;
  outcomeVariance: number;
  recentRegressions: { kind: 'exact'; exact: number } | { kind: 'at_least'; at_least: 10 | 50 };
  /** ISO 8601, rounded to the nearest 5 minutes; null when none in the 7-day window. */
  lastRegressionAt: string | null;
  /**
   * The latest change the change detector found for the selected pair in the 7 days up to now
   * (README "Drift: change detection"): absent when none. Times ISO 8601.
   */
  lastChange?: { direction: 'drop' | 'rise'; since: string; detectedAt: string };
  /** Set when the pick is a re-try (routing.retry_starved): of a starved candidate, or of one whose rise is being followed up. */
  retry?: 'starved' | 'rising';
}

export interface RoutingInsight {
  /** Whether a router (smart_cost, feedback_driven) ran; false for direct/ordered/weighted. */
  routerInvoked: boolean;
  phase: Phase | null;
  weights: { session: number; auto: number; manual: number; benchmark: number } | null;
  confidence: number | null;
  confidenceReason: ConfidenceReason;
  explorationRateEffective: number;
  usedSharedPoolPrior: boolean;
  evidence: RoutingEvidence | null;
  /** The firewall blocked the request (explain reports it; chat answers 400 firewall_blocked). */
  firewallBlocked: boolean;
}
