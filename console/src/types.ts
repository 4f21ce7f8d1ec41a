/**
 * The shapes of the API answers the console reads (docs/api.md): the contract's experiments and
 * explain, and the Admin API's resources. Only fields the pages show are listed.
 */

export interface Pair {
  provider: string;
  model: string;
}

export type ExperimentStatus = 'draft' | 'active' | 'completed' | 'rolled_back';

export interface Experiment {
  id: string;
  type: 'canary' | 'shadow';
  status: ExperimentStatus;
  traffic_pct: number;
  baseline: Pair;
  candidate: Pair;
  started_at: string | null;
  ended_at: string | null;
  summary: Record<string, unknown> | null;
  stop_rule?: { min_n: number; max_regression: number };
  created_at?: string;
  created_by_key_id?: string | null;
}

export interface ExperimentEvent {
  id: string;
  kind: string;
  actor: 'api_key' | 'system';
  actor_api_key_id: string | null;
  detail: Record<string, unknown> | null;
  created_at: string;
}

export interface ArmFigures extends Pair {
  samples: number;
  requests: number;
  quality: number | null;
  mean_score: number | null;
  useful_rate: number | null;
  error_rate: number | null;
  p50_latency_ms: number | null;
  mean_cost_usd: number | null;
  quality_parts: { mean_score: number | null; useful_rate: number | null; success_rate: number | null; weights: Record<string, number> };
  min_n: number;
  samples_to_min_n: number;
}

export interface StopRuleState {
  formula: string;
  min_n: number;
  max_regression: number;
  verdict: 'wait' | 'complete' | 'rollback';
  quality_gap: number | null;
  verdict_at_min_n: 'complete' | 'rollback' | null;
}

export interface ExperimentDetail {
  experiment: Experiment;
  events: ExperimentEvent[];
  events_next_cursor: string | null;
  arms: { baseline: ArmFigures; candidate: ArmFigures };
  stop_rule: StopRuleState;
}

export interface ExplainAnswer {
  dry_run: true;
  strategy_id: string;
  phase: string | null;
  weights: { session: number; auto: number; manual: number; benchmark: number } | null;
  candidates: Array<Pair & { score: number }>;
  filtered: Array<Pair & { reason: string; score: number }>;
  would_select: Pair | null;
  reason: string;
  confidence: number | null;
  confidence_reason: string | null;
  exploration_rate_effective: number;
  used_shared_pool_prior: boolean;
  evidence: {
    samples: number;
    top2_score_gap: number;
    outcome_variance: number;
    recent_regressions: { kind: 'exact'; exact: number } | { kind: 'at_least'; at_least: number };
    last_regression_at: string | null;
  } | null;
  explanation: { text: string; template_id: string };
}

export interface AdminKey {
  id: string;
  prefix: string;
  permissions: string[];
  source: string;
  config_managed: boolean;
  created_at: string;
  last_used_at: string | null;
  revoked: boolean;
  revoked_at: string | null;
  limits: Limits | null;
}

export interface KeyAudit {
  id: string;
  key_id: string;
  action: string;
  actor: string;
  actor_key_id: string | null;
  detail: Record<string, unknown> | null;
  created_at: string;
}

export interface ModelStats {
  n: number;
  requests: number;
  outcome_mean: number;
  outcome_variance: number;
  score_mean: number;
  score_variance: number;
  useful_rate: number;
  nps: { detractors: number; passives: number; promoters: number };
  success_rate: number;
  latency_ms: { p50: number | null; p90: number | null; p99: number | null };
  cost_mean_usd: number | null;
  computed_at: string;
}

export interface RouteView {
  route: string;
  strategy: string;
  phase: string | null;
  confidence: number | null;
  confidence_reason: string | null;
  used_shared_pool_prior: boolean;
  score: number | null;
  rank: number | null;
  would_select: boolean;
  filtered_reason: string | null;
}

export interface AdminModel extends Pair {
  type: 'chat' | 'embedding';
  catalogue: { quality: number | null; manual_score: number | null; cost: { input_per_mtok: number; output_per_mtok: number } | null };
  stats: ModelStats | null;
  pool: ModelStats | null;
  regressions: { count: number; last_at: string | null };
  routes: RouteView[];
}

export interface AdminModelsPage {
  data: AdminModel[];
  next_cursor: string | null;
  stats_refreshed_at: string | null;
}

export interface UsagePoint {
  t: string;
  group: Record<string, string | number | null> | null;
  requests: number;
  errors: number;
  errors_by_code: Array<{ code: string; count: number }>;
  tokens: { prompt: number; completion: number; reasoning: number };
  cost_usd: number;
  latency_ms: { p50: number | null; p90: number | null; p99: number | null };
  fallbacks: number;
  traffic_share: Array<{ provider: string | null; model: string | null; requests: number; share: number }>;
}

export interface UsagePage {
  from: string;
  to: string;
  step: string;
  group_by: string | null;
  source: string;
  data: UsagePoint[];
  next_cursor: string | null;
}

export interface TraceSummary {
  id: string;
  created_at: string;
  request_id: string;
  api_key_id: string;
  session_id: string | null;
  endpoint: string;
  requested_model: string;
  route: string | null;
  strategy: string | null;
  selected: Pair | null;
  status: number;
  error_code: string | null;
  fallback_used: boolean;
  attempts: number;
  latency_ms: number;
  ttft_ms: number | null;
  tokens: { prompt: number | null; completion: number | null; reasoning: number | null };
  cost_usd: number | null;
  finish_reason: string | null;
  experiment: { id: string; arm: string | null } | null;
}

export interface TraceDetail extends TraceSummary {
  candidates: Array<Pair & { score: number | null }>;
  filtered: Array<Pair & { reason: string }>;
  failed_attempts: Array<Pair & { error: string; status: number | null }>;
}

export interface BreakerTransition {
  at: string;
  from: string | null;
  to: string;
  cause: { error: string; status: number | null } | null;
  open_until: string | null;
  openings: number;
  replica: string;
}

export interface AdminProvider {
  id: string;
  family: string;
  breaker: { state: string; open_until: string | null; consecutive_failures: number };
  transitions: BreakerTransition[];
  traffic: { requests: number; errors: number; error_rate: number | null };
}

export interface AdminProvidersPage {
  data: AdminProvider[];
  next_cursor: string | null;
  window: { from: string; to: string };
}

/** A key's or an organisation's controls (README "Limits"); a key's may also expire. */
export interface Limits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
  monthly_budget_usd?: number;
  models?: string[];
  expires_at?: string;
}

export interface OrgLimits {
  organization: string;
  config_managed: boolean;
  limits: Limits | null;
  usage: { month: string; reset_at: string; spend_usd: number; keys: Record<string, number> };
}
