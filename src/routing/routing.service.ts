import { Injectable, Optional } from '@nestjs/common';
import { GatewayError } from '../common/errors/gateway-error';
import { ownValue } from '../common/own-key';
import { AppConfig } from '../config/app-config';
import { resolveTarget, RouteSpec, TargetRef } from '../config/gateway-config';
import { StatsSnapshot } from '../learning/model-stats';
import { Firewall } from './firewall/firewall';
import { RegressionsView } from './regressions/regressions-view';
import { BreakerView } from '../resilience/circuit-breaker/breaker-view';
import type { Candidate, FilteredCandidate, FilterReason, RoutingDecision, RoutingInput, RoutingInsight } from './routing.types';
import { directStrategy } from './strategies/basic.strategies';
import { estimateTokens, overCostCeiling } from './strategies/cost';
import { LearnedScorer } from './strategies/learned-score';
import type { RoutingStrategy, StrategyContext } from './strategies/strategy';
import { createStrategies } from './strategies/strategy-registry';
import { applyTemplate } from './templates';

/** A route's `orgs` or `models` list names the value, or has the wildcard `*`. */
export const matches = (patterns: readonly string[], value: string) => patterns.includes('*') || patterns.includes(value);
const key = (t: TargetRef) => `${t.provider}\u0000${t.model}`;

/** The clock routing reads once per decision (regression windows); tests bind a fixed one. */
export abstract class RoutingClock {
  abstract now(): Date;
}

interface Part {
  rule: RoutingDecision['rule'];
  strategy: RoutingStrategy;
  targets: TargetRef[];
}

/** What a decision says when no router ran (direct, ordered, weighted; or the firewall stopped it first). */
export const NO_ROUTER: Readonly<RoutingInsight> = {
  routerInvoked: false,
  phase: null,
  weights: null,
  confidence: null,
  confidenceReason: 'no_router_invoked',
  explorationRateEffective: 0,
  usedSharedPoolPrior: false,
  evidence: null,
  firewallBlocked: false,
};

/**
 * The routing chain (docs/architecture.md "The routing chain"), one piece of code for live traffic and for explain's dry run:
 * rule → template → firewall → candidates and constraints → strategy → plan. It calls no provider,
 * touches no store and increments no counter (the stats, regressions and breakers it reads are
 * in-memory views), so a dry run has no side effect; dispatch (probes, fallback) belongs to the caller.
 * The two modes differ only inside strategies that draw: live samples, dry-run takes the means.
 */
@Injectable()
export class RoutingService {
  private readonly firewall: Firewall;
  private readonly strategies: ReturnType<typeof createStrategies>;

  constructor(
    private readonly config: AppConfig,
    // Optional: without the learning snapshot every organisation is at day zero; without the
    // regression view there are none (unit tests, and modules that do not wire them).
    @Optional() stats?: StatsSnapshot,
    @Optional() regressions?: RegressionsView,
    @Optional() private readonly clock?: RoutingClock,
    // Optional: without it no breaker is open as far as routing knows (dispatch still checks them).
    @Optional() private readonly breakers?: BreakerView,
  ) {
    const g = config.gateway;
    // Compiled once, at start-up; a pattern outside the linear-time matcher's language is a config error.
    this.firewall = Firewall.compile(g.firewall.rules);
    this.strategies = createStrategies(new LearnedScorer(g.routing, g.models, stats, regressions), g.routing, g.models);
  }

  route(input: RoutingInput): RoutingDecision {
    const names = input.model.split(',').map((s) => s.trim());
    if (names.some((n) => n === '')) throw new GatewayError('invalid_request', 'model must not contain empty entries.', { param: 'model' });
    const parts = names.map((name) => this.resolve(name, input.caller.orgId));
    const first = parts[0];
    const strategyId = parts.length > 1 && first.strategy.id === 'direct' ? 'ordered' : first.strategy.id;

    const template = first.rule.route?.template ? ownValue(this.config.gateway.templates, first.rule.route.template) : undefined;
    const templated = applyTemplate(input.messages, template, input.inputs);

    // A route-scoped firewall rule applies when any route of a comma list names it: the messages go to all of them.
    const routeNames = parts.flatMap((p) => (p.rule.route ? [p.rule.route.name] : []));
    const fw = this.firewall.apply(templated, routeNames);
    if (fw.blockedBy !== null) {
      const all = dedupe(parts.flatMap((p) => p.targets));
      return {
        requestedModel: input.model,
        rule: first.rule,
        strategyId,
        candidates: [],
        filtered: all.map((t) => ({ provider: t.provider, model: t.model, reason: 'firewall_blocked', score: 0 })),
        plan: [],
        messages: [],
        insight: { ...NO_ROUTER, firewallBlocked: true },
        firewall: { blockedBy: fw.blockedBy, redactedBy: [] },
      };
    }

    const now = this.clock?.now() ?? new Date();
    const tokens = estimateTokens(fw.messages, input.maxCompletionTokens, this.config.gateway.routing.smart_cost.default_output_tokens);
    const random = input.random ?? Math.random;

    // Each part is filtered and ordered by its own rule; a comma list then falls back part by part.
    const seen = new Set<string>();
    const candidates: Candidate[] = [];
    const filtered: FilteredCandidate[] = [];
    // Read once per decision, so every part sees the same breakers.
    const open = this.openBreakers(parts);
    let insight: RoutingInsight = NO_ROUTER;
    parts.forEach((part, index) => {
      const ctx: StrategyContext = { route: part.rule.route, input, random, now, tokens };
      const { kept, removed } = this.candidatesOf(part, open, ctx);
      for (const f of removed) filtered.push({ ...f, score: part.strategy.scoreOf?.(f, ctx) ?? 0 });
      if (kept.length === 0) return;
      const result = part.strategy.select(kept, ctx);
      // Assigned, not spread: spreading would read (and so compute) the lazily drawn confidence fields.
      if (index === 0 && result.insight) insight = Object.assign(result.insight, { firewallBlocked: false });
      for (const c of result.ordered) {
        if (seen.has(key(c))) continue;
        seen.add(key(c));
        candidates.push(c);
      }
    });
    const decision: RoutingDecision = {
      requestedModel: input.model,
      rule: first.rule,
      strategyId,
      candidates,
      // A pair another part of a comma list kept is a candidate, not filtered.
      filtered: dedupe(filtered).filter((f) => !seen.has(key(f))),
      plan: candidates.map(({ provider, model }) => ({ provider, model })),
      messages: fw.messages,
      insight,
      firewall: { blockedBy: null, redactedBy: fw.redactedBy },
    };
    if (open.size > 0) {
      // The primary is the first listed target only where the list is the order (direct, ordered): a
      // weighted or learning strategy might never have chosen it, so its absence is no fallback.
      const listed = first.strategy.id === 'direct' || first.strategy.id === 'ordered';
      decision.breakerOpen = { primary: listed && open.has(first.targets[0].provider), retryAfterMs: Math.min(...open.values()) };
    }
    return decision;
  }

  /** The providers of these parts whose breaker is open, with the time left of each open period (ms). */
  private openBreakers(parts: readonly Part[]): Map<string, number> {
    const open = new Map<string, number>();
    if (!this.breakers) return open;
    for (const part of parts) {
      for (const t of part.targets) {
        const ms = open.has(t.provider) ? null : this.breakers.openForMs(t.provider);
        if (ms !== null) open.set(t.provider, ms);
      }
    }
    return open;
  }

  /**
   * Step 4 of the routing chain: candidates = the part's targets minus those whose breaker is open, then the
   * route's constraints (`max_cost_increase` against the route's first target, whatever its strategy).
   */
  private candidatesOf(part: Part, open: ReadonlyMap<string, number>, ctx: StrategyContext): { kept: TargetRef[]; removed: Array<TargetRef & { reason: FilterReason }> } {
    const removed: Array<TargetRef & { reason: FilterReason }> = [];
    const sift = (targets: TargetRef[], keep: (t: TargetRef) => boolean, reason: FilterReason): TargetRef[] => {
      for (const t of targets) if (!keep(t)) removed.push({ provider: t.provider, model: t.model, reason });
      return targets.filter(keep);
    };
    let kept = sift(part.targets, (t) => !open.has(t.provider), 'breaker_open');
    const route = part.rule.route;
    const ratio = route?.constraints.max_cost_increase;
    if (route && ratio !== undefined) {
      const over = overCostCeiling(kept, route.targets[0], ratio, this.config.gateway.models, ctx.tokens);
      kept = sift(kept, (t) => !over.has(t), 'constraint_max_cost_increase');
    }
    return { kept, removed };
  }

  /** A route whose `models` names it (first match wins); else a catalogue id or provider/model with the implicit rule. */
  private resolve(name: string, orgId: string): Part {
    const route = this.config.gateway.routes.find((r) => matches(r.orgs, orgId) && matches(r.models, name));
    if (route) return { rule: { name: route.name, implicit: false, route }, strategy: this.strategies[route.strategy], targets: [...route.targets] };
    const resolved = resolveTarget(name, this.config.gateway.models);
    if (typeof resolved === 'string' || resolved.length === 0) {
      throw new GatewayError('model_not_found', `The model "${name}" does not exist or no route serves it.`, { param: 'model' });
    }
    const chat = resolved.filter((t) => ownValue(this.config.gateway.models, t.model)?.type === 'chat');
    if (chat.length === 0) throw new GatewayError('model_not_found', `The model "${name}" is not a chat model.`, { param: 'model' });
    return { rule: { name: `implicit:${name}`, implicit: true }, strategy: directStrategy, targets: chat };
  }
}

function dedupe<T extends TargetRef>(items: readonly T[]): T[] {
  const seen = new Set<string>();
  return items.filter((t) => {
    const k = key(t);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

export type { RouteSpec };
