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
  /** The messages to send: template messages first, placeholders filled. */
  messages: ChatMessage[];
}
