import { Secret } from './secret';
import { arr, bool, custom, int, Infer, nullable, num, obj, oneOf, optional, record, str, withDefault, ConfigError } from './schema';

export const PROVIDER_FAMILIES = [
  'openai', 'groq', 'azure', 'deepseek', 'mistral', 'together', 'openrouter', 'vllm', 'ollama', 'anthropic', 'gemini', 'mock',
] as const;
export type ProviderFamily = (typeof PROVIDER_FAMILIES)[number];

export const FEATURES = ['has_test_ab', 'feedback_routing', 'explain'] as const;
export type Feature = (typeof FEATURES)[number];
export const PERMISSIONS = ['read', 'write'] as const;
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

const cost = obj({ input_per_mtok: num({ min: 0 }), output_per_mtok: num({ min: 0 }) });
const modelTarget = obj({ upstream: optional(str({ min: 1 })), timeouts: optional(timeouts) });

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
  timeouts: optional(timeouts),
});

const apiKey = obj({
  id: id(),
  key: secret(),
  permissions: withDefault(arr(oneOf(PERMISSIONS)), ['read', 'write'] as Permission[]),
});

const organization = obj({
  name: optional(str({ min: 1 })),
  plan: withDefault(oneOf(PLANS), 'free'),
  features: withDefault(arr(oneOf(FEATURES)), [] as Feature[]),
  monthly_request_limit: withDefault(nullable(int({ min: 0 })), null),
  kill_switches: withDefault(arr(oneOf(KILL_SWITCHES)), [] as KillSwitch[]),
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
  requests_per_minute_per_key: withDefault(int({ min: 1 }), 600),
  experiment_creates_per_hour: withDefault(int({ min: 1 }), 20),
  explain_per_minute_per_org: withDefault(int({ min: 1 }), 30),
  explain_per_minute_per_key: withDefault(int({ min: 1 }), 10),
});

/**
 * The learning loop (DESIGN §6, issue 6): how far back the aggregates look, how often the job
 * recomputes them, and the outcome weights of y = weights.score·(score/10) + weights.useful·useful (they sum to 1,
 * checked in the loader, so y stays in [0, 1]).
 */
const learning = obj({
  window_days: withDefault(num({ min: 0.001, max: 3650 }), 30),
  refresh_seconds: withDefault(num({ min: 0.05, max: 86_400 }), 5),
  weights: withDefault(obj({ score: num({ min: 0, max: 1 }), useful: num({ min: 0, max: 1 }) }), { score: 0.6, useful: 0.4 }),
});

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
});

export type RawGatewayConfig = Infer<typeof gatewayConfigSchema>;
export { ConfigError };
