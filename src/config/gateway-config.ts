import { parse as parseYaml, YAMLParseError } from 'yaml';
import { keyedMap, ownValue } from '../common/own-key';
import { Secret } from './secret';
import { firewallPatternProblem } from '../common/pattern/firewall-pattern';
import { ConfigError } from './schema';
import {
  Feature, gatewayConfigSchema, KeyLimits, KillSwitch, OrgLimits, Permission, Plan, ProviderFamily, RawGatewayConfig, ReasoningMode, StrategyId,
  StructuredOutputMode,
} from './gateway-config.schema';

export interface Timeouts {
  connect_ms?: number;
  first_token_ms?: number;
  idle_ms?: number;
  total_ms?: number;
}

export interface ProviderSpec {
  id: string;
  family: ProviderFamily;
  base_url?: string;
  api_key?: Secret;
  api_version?: string;
  headers: Readonly<Record<string, string>>;
  timeouts: Timeouts;
  max_response_bytes?: number;
}

/** One provider serving a catalogue model: the (provider, upstream name) pair tried in order. */
export interface ModelTargetSpec {
  provider: string;
  upstream: string;
  timeouts: Timeouts;
  /** `structured_output` of the target, else of the model; absent = the provider family's default. */
  structured_output?: StructuredOutputMode;
}

/**
 * The families each structured-output path exists for: `converted_schema` is Gemini's
 * `responseSchema` and `forced_tool` is Anthropic's tool emulation; any other family given one is a
 * start-up error rather than a target that answers 400 at request time.
 */
const STRUCTURED_OUTPUT_FAMILIES: Partial<Record<StructuredOutputMode, readonly ProviderFamily[]>> = {
  converted_schema: ['gemini'],
  forced_tool: ['anthropic'],
};

export interface ModelSpec {
  id: string;
  type: 'chat' | 'embedding';
  targets: readonly ModelTargetSpec[];
  cost?: { input_per_mtok: number; output_per_mtok: number };
  quality?: number;
  manual_score?: number;
  max_output_tokens?: number;
  dimensions?: number;
  reasoning: ReasoningSpec;
}

export interface ReasoningSpec {
  mode: ReasoningMode;
  can_disable: boolean;
  budgets: { low?: number; medium?: number; high?: number };
}

export interface ApiKeySpec {
  id: string;
  key: Secret;
  permissions: readonly Permission[];
  /** The key's own controls (README "Limits"); null = none. */
  limits: KeyLimits | null;
}

export interface OrgSpec {
  id: string;
  name: string;
  plan: Plan;
  features: readonly Feature[];
  monthly_request_limit: number | null;
  kill_switches: readonly KillSwitch[];
  /** The organisation's controls (README "Limits"); null = none. */
  limits: OrgLimits | null;
  api_keys: readonly ApiKeySpec[];
}

/** A route target: (provider id, catalogue model id). */
export interface TargetRef {
  provider: string;
  model: string;
}

export interface RouteSpec {
  name: string;
  orgs: readonly string[];
  models: readonly string[];
  strategy: StrategyId;
  targets: readonly TargetRef[];
  weights?: readonly number[];
  template?: string;
  constraints: { max_cost_increase?: number };
}

export interface FirewallRuleSpec {
  id: string;
  pattern: string;
  action: 'block' | 'redact';
  replacement?: string;
  routes?: readonly string[];
}

export interface TemplateSpec {
  system?: string;
  messages?: readonly { role: 'system' | 'user' | 'assistant' | 'developer'; content: string }[];
}

/**
 * The validated `gateway.yaml`. Its properties are named as the file's keys (snake_case, e.g.
 * `routing.n_min`, `routes[].constraints.max_cost_increase`, `models.<id>.max_output_tokens`), so the
 * file, the code and the README's "Configuration" use one name for each setting; derived values (a
 * model's `targets`, a route's resolved `targets`) keep the same scheme. The id maps (providers,
 * models, organizations, templates, provider headers) have no prototype; read them with `ownValue`.
 */
export interface GatewayConfig {
  providers: Readonly<Record<string, ProviderSpec>>;
  models: Readonly<Record<string, ModelSpec>>;
  organizations: Readonly<Record<string, OrgSpec>>;
  routes: readonly RouteSpec[];
  firewall: { rules: readonly FirewallRuleSpec[] };
  templates: Readonly<Record<string, TemplateSpec>>;
  limits: RawGatewayConfig['limits'];
  metrics: { enabled: boolean };
  learning: RawGatewayConfig['learning'];
  routing: RawGatewayConfig['routing'];
  breakers: RawGatewayConfig['breakers'];
  stores: RawGatewayConfig['stores'];
  traces: RawGatewayConfig['traces'];
  retention: RetentionSpec;
  /** The operator console at /console (docs/architecture.md "Console"). */
  console: RawGatewayConfig['console'];
}

/** Days kept of each kind of row (null = forever), resolved against the learning window. */
export interface RetentionSpec {
  traces_days: number;
  feedback_days: number | null;
  lifecycle_events_days: number | null;
  rollups_days: number | null;
}

type Raw = RawGatewayConfig;

/** Pure: (environment, file text) → frozen, validated configuration. Throws ConfigError. */
export function loadGatewayConfig(text: string, env: Readonly<Record<string, string | undefined>>): GatewayConfig {
  const raw = gatewayConfigSchema.parse(expandEnv(parseYamlText(text), env, ''), '');
  // One function per section, in the order they name each other (a model names providers, a route
  // models and templates, a firewall rule routes); the first error stops the load.
  const providers = providersOf(raw.providers);
  const models = modelsOf(raw.models, providers);
  const organizations = organizationsOf(raw.organizations);
  const routes = routesOf(raw.routes, models, raw.templates);
  checkModelAllowLists(organizations, models, routes);
  const firewall = firewallOf(raw.firewall, routes);
  const learning = learningOf(raw.learning);
  const routing = routingOf(raw.routing);
  const retention = retentionOf(raw.retention, learning);
  // Templates, limits, metrics, breakers, stores, traces and console have no rule across fields: the schema's checks are all.
  return deepFreeze({
    providers,
    models,
    organizations,
    routes,
    firewall,
    templates: Object.assign(keyedMap<TemplateSpec>(), raw.templates),
    limits: raw.limits,
    metrics: raw.metrics,
    learning,
    routing,
    breakers: raw.breakers,
    stores: raw.stores,
    traces: raw.traces,
    retention,
    console: raw.console,
  });
}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Replaces `${VAR}` in every string scalar; a variable that is not set is an error naming it. */
function expandEnv(node: unknown, env: Readonly<Record<string, string | undefined>>, path: string): unknown {
  if (typeof node === 'string') {
    return node.replace(VAR, (_, name: string) => {
      const value = ownValue(env, name);
      if (value === undefined) throw new ConfigError(path, `environment variable ${name} is not set`);
      return value;
    });
  }
  if (Array.isArray(node)) return node.map((x, i) => expandEnv(x, env, path ? `${path}.${i}` : String(i)));
  if (node !== null && typeof node === 'object') {
    // A key named `__proto__` stays a key (and so is refused or kept by the schema like any other).
    const out = keyedMap<unknown>();
    for (const [k, v] of Object.entries(node)) out[k] = expandEnv(v, env, path ? `${path}.${k}` : k);
    return out;
  }
  return node;
}

function parseYamlText(text: string): unknown {
  try {
    return parseYaml(text, { prettyErrors: true, uniqueKeys: true, maxAliasCount: 100 }) ?? {};
  } catch (err) {
    if (err instanceof YAMLParseError) {
      const at = err.linePos?.[0];
      const where = at ? ` at line ${at.line}, column ${at.col}` : '';
      const detail = err.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
      throw new ConfigError('', `invalid YAML${where}: ${detail}`);
    }
    throw err;
  }
}

/** Each timeout from the first layer that sets it (a model's provider entry, then the model); undefined when none does. */
const timeoutsOf = (...layers: (Timeouts | undefined)[]): Timeouts => {
  const first = (k: keyof Timeouts) => layers.find((l) => l?.[k] !== undefined)?.[k];
  return { connect_ms: first('connect_ms'), first_token_ms: first('first_token_ms'), idle_ms: first('idle_ms'), total_ms: first('total_ms') };
};

function providersOf(raw: Raw['providers']): Record<string, ProviderSpec> {
  const providers = keyedMap<ProviderSpec>();
  for (const [id, p] of Object.entries(raw)) {
    providers[id] = {
      id,
      family: p.family,
      base_url: p.base_url,
      api_key: p.api_key,
      api_version: p.api_version,
      headers: p.headers ?? keyedMap<string>(),
      timeouts: timeoutsOf(p.timeouts),
      max_response_bytes: p.max_response_bytes,
    };
  }
  return providers;
}

type RawModel = Raw['models'][string];

function modelsOf(raw: Raw['models'], providers: Readonly<Record<string, ProviderSpec>>): Record<string, ModelSpec> {
  const models = keyedMap<ModelSpec>();
  for (const [id, m] of Object.entries(raw)) {
    const targets = modelTargets(id, m);
    checkTargetProviders(id, m, targets, providers);
    models[id] = {
      id,
      type: m.type,
      targets,
      cost: m.cost,
      quality: m.quality,
      manual_score: m.manual_score,
      max_output_tokens: m.max_output_tokens,
      dimensions: m.dimensions,
      reasoning: m.reasoning
        ? { mode: m.reasoning.mode, can_disable: m.reasoning.can_disable, budgets: m.reasoning.budgets ?? {} }
        : { mode: 'none', can_disable: true, budgets: {} },
    };
  }
  return models;
}

/** A model's (provider, upstream) pairs in order: `provider` (+ `upstream`) or the `providers` map, whose entries override the model's timeouts and `structured_output`. */
function modelTargets(id: string, m: RawModel): ModelTargetSpec[] {
  const path = `models.${id}`;
  if (m.provider && m.providers) throw new ConfigError(path, 'give either provider or providers, not both');
  if (m.provider) {
    return [{ provider: m.provider, upstream: m.upstream ?? id, timeouts: timeoutsOf(m.timeouts), structured_output: m.structured_output }];
  }
  if (!m.providers || Object.keys(m.providers).length === 0) throw new ConfigError(`${path}.provider`, 'is required (or providers)');
  if (m.upstream) throw new ConfigError(`${path}.upstream`, 'with providers, give upstream per provider');
  return Object.entries(m.providers).map(([p, t]) => ({
    provider: p,
    upstream: t.upstream ?? id,
    timeouts: timeoutsOf(t.timeouts, m.timeouts),
    structured_output: t.structured_output ?? m.structured_output,
  }));
}

/** Every target names a configured provider, and a family-specific `structured_output` only one of that family. */
function checkTargetProviders(id: string, m: RawModel, targets: readonly ModelTargetSpec[], providers: Readonly<Record<string, ProviderSpec>>): void {
  const path = `models.${id}`;
  for (const t of targets) {
    const at = m.provider ? `${path}.provider` : `${path}.providers.${t.provider}`;
    const provider = ownValue(providers, t.provider);
    if (!provider) throw new ConfigError(at, `unknown provider "${t.provider}"`);
    const families = t.structured_output && STRUCTURED_OUTPUT_FAMILIES[t.structured_output];
    if (families && !families.includes(provider.family)) {
      const field = m.providers?.[t.provider]?.structured_output ? `${path}.providers.${t.provider}.structured_output` : `${path}.structured_output`;
      throw new ConfigError(field, `${t.structured_output} is for the ${families.join(', ')} family, not ${provider.family} (provider "${t.provider}")`);
    }
  }
}

/** Organisations; an API key id is unique across all of them. */
function organizationsOf(raw: Raw['organizations']): Record<string, OrgSpec> {
  const organizations = keyedMap<OrgSpec>();
  const keyIds = new Set<string>();
  for (const [id, o] of Object.entries(raw)) {
    o.api_keys.forEach((k, i) => {
      if (keyIds.has(k.id)) throw new ConfigError(`organizations.${id}.api_keys.${i}.id`, `duplicate api key id "${k.id}"`);
      keyIds.add(k.id);
    });
    organizations[id] = {
      id,
      name: o.name ?? id,
      plan: o.plan,
      features: o.features,
      monthly_request_limit: o.monthly_request_limit,
      kill_switches: o.kill_switches,
      limits: o.limits ?? null,
      api_keys: o.api_keys.map((k) => ({ id: k.id, key: k.key, permissions: k.permissions, limits: k.limits ?? null })),
    };
  }
  return organizations;
}

/**
 * Why `name` cannot be an entry of a `models` allow-list (README "Limits"), or undefined when it
 * can: a catalogue id, a `provider/model` pair the catalogue serves, or a route alias (any route's
 * `models` name but the wildcard). The Admin API checks its bodies with it too.
 */
export function allowListEntryProblem(name: string, models: Readonly<Record<string, ModelSpec>>, routes: readonly RouteSpec[]): string | undefined {
  if (name.includes(',')) return `"${name}" is a comma list; give its entries one by one`;
  if (name !== '*' && routes.some((r) => r.models.includes(name))) return undefined;
  const resolved = resolveTarget(name, models);
  return typeof resolved === 'string' ? `names no catalogue model, provider/model pair or route alias: ${resolved}` : undefined;
}

/** Every entry of an organisation's or a key's `limits.models` names something a request can name. */
function checkModelAllowLists(organizations: Readonly<Record<string, OrgSpec>>, models: Readonly<Record<string, ModelSpec>>, routes: readonly RouteSpec[]): void {
  const check = (list: readonly string[] | undefined, path: string) =>
    list?.forEach((name, i) => {
      const problem = allowListEntryProblem(name, models, routes);
      if (problem) throw new ConfigError(`${path}.models.${i}`, problem);
    });
  for (const org of Object.values(organizations)) {
    check(org.limits?.models, `organizations.${org.id}.limits`);
    org.api_keys.forEach((k, i) => check(k.limits?.models, `organizations.${org.id}.api_keys.${i}.limits`));
  }
}

/** Routes with unique names, their targets resolved to (provider, catalogue model) pairs. */
function routesOf(raw: Raw['routes'], models: Readonly<Record<string, ModelSpec>>, templates: Raw['templates']): RouteSpec[] {
  const names = new Set<string>();
  return raw.map((r, i) => {
    const path = `routes.${i}`;
    if (names.has(r.name)) throw new ConfigError(`${path}.name`, `duplicate route name "${r.name}"`);
    names.add(r.name);
    const targets: TargetRef[] = [];
    r.targets.forEach((ref, j) => {
      const resolved = resolveTarget(ref, models);
      if (typeof resolved === 'string') throw new ConfigError(`${path}.targets.${j}`, resolved);
      targets.push(...resolved);
    });
    if (r.weights && r.weights.length !== r.targets.length) {
      throw new ConfigError(`${path}.weights`, `must have one weight per target (${r.targets.length})`);
    }
    if (r.template && !ownValue(templates, r.template)) throw new ConfigError(`${path}.template`, `unknown template "${r.template}"`);
    return {
      name: r.name,
      orgs: r.orgs,
      models: r.models,
      strategy: r.strategy,
      targets,
      weights: r.weights,
      template: r.template,
      constraints: { max_cost_increase: r.constraints?.max_cost_increase },
    };
  });
}

/**
 * Parses a route target: `provider/model` (a provider id, then a catalogue model id served by that
 * provider) or a bare catalogue id, which stands for each of its providers in order.
 */
export function resolveTarget(ref: string, models: Readonly<Record<string, ModelSpec>>): TargetRef[] | string {
  const slash = ref.indexOf('/');
  if (slash > 0) {
    const provider = ref.slice(0, slash);
    const model = ownValue(models, ref.slice(slash + 1));
    if (model && model.targets.some((t) => t.provider === provider)) return [{ provider, model: model.id }];
  }
  const model = ownValue(models, ref);
  if (model) return model.targets.map((t) => ({ provider: t.provider, model: model.id }));
  return slash > 0
    ? `unknown target "${ref}" (no catalogue model "${ref.slice(slash + 1)}" served by provider "${ref.slice(0, slash)}")`
    : `unknown model "${ref}"`;
}

/** Firewall rules whose patterns are in the firewall's language and whose `routes` exist. */
function firewallOf(raw: Raw['firewall'], routes: readonly RouteSpec[]): GatewayConfig['firewall'] {
  const routeNames = new Set(routes.map((r) => r.name));
  raw.rules.forEach((rule, i) => {
    // Checked by the same linear-time matcher the firewall runs them on (README "Configuration").
    const problem = firewallPatternProblem(rule.pattern);
    if (problem) throw new ConfigError(`firewall.rules.${i}.pattern`, problem);
    rule.routes?.forEach((name, j) => {
      if (!routeNames.has(name)) throw new ConfigError(`firewall.rules.${i}.routes.${j}`, `unknown route "${name}"`);
    });
  });
  return { rules: raw.rules };
}

/** The learning loop's outcome weights sum to 1, so an outcome stays in [0, 1]. */
function learningOf(raw: Raw['learning']): Raw['learning'] {
  const w = raw.weights;
  if (Math.abs(w.score + w.useful - 1) > 1e-9) {
    throw new ConfigError('learning.weights', `score and useful must sum to 1 (the outcome stays in [0, 1]), got ${w.score + w.useful}`);
  }
  return raw;
}

/** Rollups are kept this long by default, or as long as the learning window when that is longer. */
const ROLLUPS_DAYS = 400;

/**
 * Retention never lets go of what the learning loop reads: traces and feedback default to the
 * learning window and may not be shorter; rollups default to 400 days (or the window if longer) and
 * may not be shorter than the window either.
 */
function retentionOf(raw: Raw['retention'], learning: Raw['learning']): RetentionSpec {
  const window = learning.window_days;
  const atLeastWindow = (key: string, v: number | null): number | null => {
    if (v !== null && v < window) {
      throw new ConfigError(`retention.${key}`, `must be at least learning.window_days (${window}): the learning loop reads that far back, got ${v}`);
    }
    return v;
  };
  const traces = atLeastWindow('traces_days', raw.traces_days ?? window)!;
  return {
    traces_days: traces,
    feedback_days: atLeastWindow('feedback_days', raw.feedback_days === undefined ? traces : raw.feedback_days),
    lifecycle_events_days: raw.lifecycle_events_days,
    rollups_days: atLeastWindow('rollups_days', raw.rollups_days === undefined ? Math.max(ROLLUPS_DAYS, window) : raw.rollups_days),
  };
}

/** The learning router's cross-field rules: n_min ≤ n_steady, and each phase's signal weights sum to 1 with some weight on what it learns from. */
function routingOf(raw: Raw['routing']): Raw['routing'] {
  if (raw.n_min > raw.n_steady) throw new ConfigError('routing.n_min', `must not exceed routing.n_steady (${raw.n_steady}), got ${raw.n_min}`);
  for (const phase of ['cold_start', 'learning', 'steady'] as const) {
    const pw = raw.weights[phase];
    const sum = pw.session + pw.auto + pw.manual + pw.benchmark;
    if (Math.abs(sum - 1) > 1e-9) throw new ConfigError(`routing.weights.${phase}`, `session, auto, manual and benchmark must sum to 1, got ${sum}`);
    if (pw.session + pw.auto === 0) throw new ConfigError(`routing.weights.${phase}`, 'session and auto must not both be 0 (the router would never learn)');
  }
  return raw;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !(value instanceof Secret) && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
