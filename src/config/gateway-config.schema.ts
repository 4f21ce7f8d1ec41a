import { Secret } from './secret';
import { arr, bool, custom, int, Infer, Node, nullable, num, obj, oneOf, optional, record, str, withDefault, ConfigError } from './schema';

export const PROVIDER_FAMILIES = [
  'openai', 'groq', 'azure', 'deepseek', 'mistral', 'together', 'openrouter', 'vllm', 'ollama', 'anthropic', 'gemini', 'mock',
] as const;
export type ProviderFamily = (typeof PROVIDER_FAMILIES)[number];

export const FEATURES = ['has_test_ab', 'feedback_routing', 'explain'] as const;
export type Feature = (typeof FEATURES)[number];
/** `admin`: the operators' API under /v1/admin (docs/api.md "Admin API"); never granted by default. */
export const PERMISSIONS = ['read', 'write', 'admin'] as const;
export type Permission = (typeof PERMISSIONS)[number];
export const PLANS = ['free', 'pro'] as const;
export type Plan = (typeof PLANS)[number];
export const KILL_SWITCHES = ['experiments'] as const;
export type KillSwitch = (typeof KILL_SWITCHES)[number];
export const STRATEGIES = ['direct', 'ordered', 'weighted', 'smart_cost', 'feedback_driven'] as const;
export type StrategyId = (typeof STRATEGIES)[number];

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const id = () => str({ pattern: ID, what: 'an id of letters, digits and . _ : - (at most 128 characters)' });
const secret = () => custom((v, path) => new Secret(str({ min: 1 }).parse(v, path)));
const ms = () => int({ min: 1, max: 3_600_000 });

const timeouts = obj({
  connect_ms: optional(ms()),
  first_token_ms: optional(ms()),
  idle_ms: optional(ms()),
  total_ms: optional(ms()),
});

const provider = obj({
  family: oneOf(PROVIDER_FAMILIES),
  base_url: optional(str({ pattern: /^https?:\/\/\S+$/, what: 'an http(s) URL' })),
  api_key: optional(secret()),
  api_version: optional(str({ min: 1 })),
  headers: optional(record(str())),
  timeouts: optional(timeouts),
  max_response_bytes: optional(int({ min: 1024 })),
});

/**
 * How a model takes `response_format: json_schema` (README "Structured outputs"): `native` = the
 * family's own JSON-schema mode (OpenAI-compatible `response_format`, Anthropic
 * `output_config.format`, Gemini `responseJsonSchema`); `converted_schema` = Gemini's OpenAPI-subset
 * `responseSchema`; `forced_tool` = Anthropic answers through a forced tool whose input is the
 * answer; `none` = the target cannot take it and dispatch skips it. Unset = the family's default.
 */
export const STRUCTURED_OUTPUT_MODES = ['native', 'converted_schema', 'forced_tool', 'none'] as const;
export type StructuredOutputMode = (typeof STRUCTURED_OUTPUT_MODES)[number];

const cost = obj({ input_per_mtok: num({ min: 0 }), output_per_mtok: num({ min: 0 }) });
const modelTarget = obj({ upstream: optional(str({ min: 1 })), timeouts: optional(timeouts), structured_output: optional(oneOf(STRUCTURED_OUTPUT_MODES)) });

export const REASONING_MODES = ['none', 'effort', 'budget', 'level', 'adaptive'] as const;
export type ReasoningMode = (typeof REASONING_MODES)[number];

/**
 * How a model takes `reasoning_effort` (README "reasoning_effort mapping"): `none` = the field is
 * dropped; `effort` = passed through (OpenAI-compatible); `budget` = a thinking-token budget
 * (Anthropic extended thinking, Gemini 2.5); `level` = Gemini 3 thinkingLevel; `adaptive` =
 * Anthropic adaptive thinking with output_config.effort. `can_disable` says whether `none` may
 * turn reasoning off; `budgets` overrides the budget per effort.
 */
const reasoning = obj({
  mode: oneOf(REASONING_MODES),
  can_disable: withDefault(bool(), true),
  budgets: optional(obj({ low: optional(int({ min: 0 })), medium: optional(int({ min: 0 })), high: optional(int({ min: 0 })) })),
});

const model = obj({
  type: withDefault(oneOf(['chat', 'embedding'] as const), 'chat'),
  provider: optional(id()),
  upstream: optional(str({ min: 1 })),
  providers: optional(record(modelTarget)),
  cost: optional(cost),
  quality: optional(num({ min: 0, max: 1 })),
  manual_score: optional(num({ min: 0, max: 1 })),
  max_output_tokens: optional(int({ min: 1 })),
  dimensions: optional(int({ min: 1 })),
  reasoning: optional(reasoning),
  structured_output: optional(oneOf(STRUCTURED_OUTPUT_MODES)),
  timeouts: optional(timeouts),
});

/** An ISO 8601 time with a zone (`Z` or ±hh:mm), e.g. 2026-01-31T00:00:00Z; kept as given. */
const ISO_WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;
const isoTime = () =>
  custom((v, path) => {
    const text = str().parse(v, path);
    if (!ISO_WITH_ZONE.test(text) || !Number.isFinite(Date.parse(text))) throw new ConfigError(path, 'must be an ISO 8601 time with a zone, e.g. 2026-01-31T00:00:00Z');
    return text;
  });

/**
 * The controls of an organisation or of one key (README "Limits"): requests and tokens per minute
 * (sliding windows), a spend budget per UTC month in USD from the catalogue's costs, and the models
 * it may use (catalogue ids, `provider/model` pairs, route aliases). Absent = no such control.
 * The Admin API takes the same shape (docs/api.md "Admin API", limits), checked by these nodes.
 */
const controls = {
  requests_per_minute: optional(int({ min: 0, max: 1_000_000_000 })),
  tokens_per_minute: optional(int({ min: 0, max: 1_000_000_000_000 })),
  monthly_budget_usd: optional(num({ min: 0, max: 1_000_000_000 })),
  models: optional(arr(str({ min: 1 }), { min: 1 })),
};
export interface OrgLimits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
  monthly_budget_usd?: number;
  models?: string[];
}
/** A key's controls add `expires_at`: after it the key is refused like an unknown one. */
export interface KeyLimits extends OrgLimits {
  expires_at?: string;
}
export const orgLimitsSchema: Node<OrgLimits> = obj(controls);
export const keyLimitsSchema: Node<KeyLimits> = obj({ ...controls, expires_at: optional(isoTime()) });

const apiKey = obj({
  id: id(),
  key: secret(),
  permissions: withDefault(arr(oneOf(PERMISSIONS)), ['read', 'write'] as Permission[]),
  limits: optional(keyLimitsSchema),
});

const organization = obj({
  name: optional(str({ min: 1 })),
  plan: withDefault(oneOf(PLANS), 'free'),
  features: withDefault(arr(oneOf(FEATURES)), [] as Feature[]),
  monthly_request_limit: withDefault(nullable(int({ min: 0 })), null),
  kill_switches: withDefault(arr(oneOf(KILL_SWITCHES)), [] as KillSwitch[]),
  limits: optional(orgLimitsSchema),
  api_keys: withDefault(arr(apiKey), []),
});

const route = obj({
  name: id(),
  orgs: withDefault(arr(str({ min: 1 }), { min: 1 }), ['*']),
  models: arr(str({ min: 1 }), { min: 1 }),
  strategy: withDefault(oneOf(STRATEGIES), 'ordered'),
  targets: arr(str({ min: 1 }), { min: 1 }),
  weights: optional(arr(num({ min: 0 }))),
  template: optional(id()),
  constraints: optional(obj({ max_cost_increase: optional(num({ min: 0 })) })),
});

const firewallRule = obj({
  id: id(),
  pattern: str({ min: 1 }),
  action: oneOf(['block', 'redact'] as const),
  replacement: optional(str()),
  routes: optional(arr(id())),
});

const template = obj({
  system: optional(str()),
  messages: optional(arr(obj({ role: oneOf(['system', 'user', 'assistant', 'developer'] as const), content: str() }))),
});

const limits = obj({
  // Unlimited by default: one application usually sends all its traffic with one key.
  requests_per_minute_per_key: withDefault(nullable(int({ min: 1 })), null),
  experiment_creates_per_hour: withDefault(int({ min: 1 }), 20),
  explain_per_minute_per_org: withDefault(int({ min: 1 }), 30),
  explain_per_minute_per_key: withDefault(int({ min: 1 }), 10),
  // What a chat request without max_tokens is charged up front for its answer against
  // tokens_per_minute and monthly_budget_usd, until the answer says what it used (README "Limits").
  default_completion_tokens: withDefault(int({ min: 1, max: 10_000_000 }), 256),
});

/**
 * The learning loop (docs/architecture.md "The learning loop"): how far back the aggregates look, how often the job
 * recomputes them, and the outcome weights of y = weights.score·(score/10) + weights.useful·useful (they sum to 1,
 * checked in the loader, so y stays in [0, 1]).
 */
const learning = obj({
  window_days: withDefault(num({ min: 0.001, max: 3650 }), 30),
  refresh_seconds: withDefault(num({ min: 0.05, max: 86_400 }), 5),
  weights: withDefault(obj({ score: num({ min: 0, max: 1 }), useful: num({ min: 0, max: 1 }) }), { score: 0.6, useful: 0.4 }),
});

const unit = () => num({ min: 0, max: 1 });
const signalWeights = (d: { session: number; auto: number; manual: number; benchmark: number }) =>
  withDefault(obj({ session: unit(), auto: unit(), manual: unit(), benchmark: unit() }), d);
/** A section whose every key has a default is itself optional, defaulting to those defaults. */
const section = <S extends Parameters<typeof obj>[0]>(shape: S, path: string) => {
  const node = obj(shape);
  return withDefault(node, node.parse({}, path));
};

/**
 * The learning router's parameters (docs/architecture.md "One model of uncertainty"; README
 * "Configuration" says what each one does). Cross-field rules (n_min ≤ n_steady, phase weights
 * summing to 1) are checked in the loader.
 */
const routing = obj({
  // The prior is worth n0 pseudo-samples of per-sample variance prior_variance. prior_variance is about
  // one session outcome's variance (sd .2 on [0, 1]), so the prior does not inflate σ² once samples
  // come in; a prior mean's day-zero spread is √(prior_variance / n0) = .14 (as with the former 5 and
  // .1), but a catalogue prior that is wrong stops steering the mean after a few sessions, not a dozen.
  n0: withDefault(num({ min: 0.001, max: 1_000_000 }), 2),
  n_min: withDefault(int({ min: 1, max: 1_000_000 }), 20),
  n_steady: withDefault(int({ min: 1, max: 10_000_000 }), 200),
  prior_variance: withDefault(num({ min: 0.000001, max: 0.25 }), 0.04),
  variance_floor: withDefault(num({ min: 0.000001, max: 0.25 }), 0.01),
  default_prior: withDefault(unit(), 0.5),
  latency_target_ms: withDefault(int({ min: 1, max: 3_600_000 }), 2000),
  confidence_draws: withDefault(int({ min: 10, max: 100_000 }), 1000),
  // session:auto is 4:1 in every phase, so the observed mean ō = .8·session + .2·auto is the same blend
  // for every candidate whatever its phase. (A ratio that changes with the phase makes a candidate's
  // score jump at n_min and n_steady and, since auto is usually above the feedback outcome, favours
  // the candidates with fewer samples: the old .15/.15 → .35/.15 → .55/.15 kept re-exploring them.)
  // manual:benchmark sets the prior's mix; the prior's weight is n0.
  weights: section(
    {
      cold_start: signalWeights({ session: 0.24, auto: 0.06, manual: 0.35, benchmark: 0.35 }),
      learning: signalWeights({ session: 0.4, auto: 0.1, manual: 0.25, benchmark: 0.25 }),
      steady: signalWeights({ session: 0.56, auto: 0.14, manual: 0.15, benchmark: 0.15 }),
    },
    'routing.weights',
  ),
  confidence_caps: section(
    { day0: withDefault(unit(), 0.5), shared: withDefault(unit(), 0.75), insufficient_samples: withDefault(unit(), 0.6) },
    'routing.confidence_caps',
  ),
  smart_cost: section(
    { tolerance: withDefault(unit(), 0.05), default_output_tokens: withDefault(int({ min: 1, max: 10_000_000 }), 256) },
    'routing.smart_cost',
  ),
  // Decaying exploration of feedback_driven (learned-score.ts explorationScale): a live Thompson draw
  // uses the candidate's posterior with its standard deviation scaled by max(floor, 1/√(1 +
  // n/decay_samples)), n = the organisation's samples for that candidate. Its draws narrow with its
  // own evidence (≈ 1/n instead of 1/√n once n ≫ decay_samples), so a runner-up close to the favourite
  // is re-tried tens of times instead of hundreds, while a starved candidate keeps its spread and can
  // win back traffic. The floor bounds the decay (it binds from n = decay_samples·(1/floor² − 1), 354
  // with the defaults), so a candidate whose early samples were unlucky is still retried; floor 1 is
  // plain Thompson sampling. Confidence uses the unscaled posterior; exploration_rate_effective the
  // scaled draws. Defaults from the learning benchmark over 30 seeds (README "Learning").
  exploration: section(
    { decay_samples: withDefault(num({ min: 1, max: 1_000_000_000 }), 35), floor: withDefault(num({ min: 0.01, max: 1 }), 0.3) },
    'routing.exploration',
  ),
  // Starved candidates re-tried (README "Routing that learns"; learned-score.ts retryPick): a
  // feedback_driven candidate that served none of the organisation's last after_requests requests, or
  // none for after_seconds, is put first for a `share` of the route's requests (drawn from the request
  // id), so a model that improved while routing ignored it is seen again; one whose re-tried answers
  // ran steadily above its record (a rise on its way to the change detector's alarm) for a
  // `rising_share`. The shares bound what re-tries cost. The defaults (after_requests 2,000,
  // rising_share 0) keep a service whose models do not change at its best; `after_requests: 700,
  // rising_share: 0.1` finds the learning benchmark's rise of a starved model within 1,000 sessions,
  // at a stationary regret ratio of 0.480 instead of 0.401 (README "Learning": re-trying every starved
  // model that often is answers from worse models wherever nothing changed).
  retry_starved: section(
    {
      enabled: withDefault(bool(), true),
      after_requests: withDefault(int({ min: 1, max: 1_000_000_000 }), 2000),
      after_seconds: withDefault(num({ min: 1, max: 365 * 86_400 }), 86_400),
      share: withDefault(num({ min: 0, max: 0.5 }), 0.02),
      rising_share: withDefault(num({ min: 0, max: 0.5 }), 0),
    },
    'routing.retry_starved',
  ),
  regressions: section(
    {
      margin: withDefault(unit(), 0.1),
      rolling_hours: withDefault(num({ min: 0.01, max: 24 * 365 }), 24),
      min_samples: withDefault(int({ min: 1, max: 1_000_000 }), 20),
      check_seconds: withDefault(num({ min: 1, max: 86_400 }), 60),
      penalty: withDefault(unit(), 0.05),
      max_penalty: withDefault(unit(), 0.2),
    },
    'routing.regressions',
  ),
});

/**
 * The circuit breakers (docs/architecture.md "Circuit breakers"). Routing reads an in-process view of
 * them; other replicas open breakers too, so each replica re-reads the shared state this often.
 */
const breakers = section({ refresh_seconds: withDefault(num({ min: 0.05, max: 60 }), 1) }, 'breakers');

/**
 * Store outages (docs/operations.md "Store outages"): the bounds of a request's wait on Redis and
 * Postgres, and how often a store found dead or frozen is probed. While a store is unavailable,
 * every call to it is refused at once and its fallback serves.
 */
const stores = section(
  {
    cache_command_timeout_ms: withDefault(int({ min: 10, max: 60_000 }), 500),
    analytics_request_timeout_ms: withDefault(int({ min: 10, max: 60_000 }), 1_000),
    probe_interval_ms: withDefault(int({ min: 10, max: 600_000 }), 1_000),
    probe_timeout_ms: withDefault(int({ min: 10, max: 60_000 }), 1_000),
  },
  'stores',
);

/**
 * Decision traces (docs/operations.md "Store outages"): while the analytics store is down or slow,
 * traces go to the trace spool in the data dir, at most `spool_max_bytes` (default 256 MiB; 0 = no
 * spool, traces wait in the in-memory buffer only), and are replayed once it answers.
 */
const traces = section({ spool_max_bytes: withDefault(int({ min: 0, max: 2 ** 50 }), 256 * 1024 * 1024) }, 'traces');

const days = () => num({ min: 0.001, max: 36_500 });

/**
 * Retention (docs/architecture.md "Retention"; README "Configuration"): how many days of each kind
 * of row are kept; null = forever. Traces and feedback default to, and may not go below, the
 * learning window (`learning.window_days`): the loader resolves and checks that across sections.
 * Experiment lifecycle events are kept by default; rollups 400 days.
 */
const retention = section(
  {
    traces_days: optional(days()),
    feedback_days: optional(nullable(days())),
    lifecycle_events_days: withDefault(nullable(days()), null),
    rollups_days: optional(nullable(days())),
  },
  'retention',
);

/**
 * The operator console (docs/architecture.md "Console"): the web UI served at /console on the
 * operators' REST API. Off = /console is not mounted at all (404 like any unknown path).
 */
const consoleSection = section({ enabled: withDefault(bool(), true) }, 'console');

export const gatewayConfigSchema = obj({
  providers: withDefault(record(provider, id()), {}),
  models: withDefault(record(model, str({ pattern: /^[^,\s/][^,\s]*$/, what: 'a model id without commas or spaces' })), {}),
  organizations: withDefault(record(organization, id()), {}),
  routes: withDefault(arr(route), []),
  firewall: withDefault(obj({ rules: withDefault(arr(firewallRule), []) }), { rules: [] }),
  templates: withDefault(record(template, id()), {}),
  limits: withDefault(limits, limits.parse({}, 'limits')),
  metrics: withDefault(obj({ enabled: withDefault(bool(), true) }), { enabled: true }),
  learning: withDefault(learning, learning.parse({}, 'learning')),
  routing: withDefault(routing, routing.parse({}, 'routing')),
  breakers,
  stores,
  traces,
  retention,
  console: consoleSection,
});

export type RawGatewayConfig = Infer<typeof gatewayConfigSchema>;
export { ConfigError };
