import { Injectable } from '@nestjs/common';
import { GatewayError } from '../common/errors/gateway-error';
import { AppConfig } from '../config/app-config';
import { resolveTarget, RouteSpec, TargetRef } from '../config/gateway-config';
import { ConfigError } from '../config/schema';
import type { Candidate, RoutingDecision, RoutingInput } from './routing.types';
import { directStrategy } from './strategies/basic.strategies';
import type { RoutingStrategy } from './strategies/strategy';
import { STRATEGIES } from './strategies/strategy-registry';
import { applyTemplate } from './templates';

const matches = (patterns: readonly string[], value: string) => patterns.includes('*') || patterns.includes(value);
const key = (t: TargetRef) => `${t.provider}\u0000${t.model}`;

interface Part {
  rule: RoutingDecision['rule'];
  strategy: RoutingStrategy;
  targets: TargetRef[];
}

/**
 * The routing chain of DESIGN §6, one piece of code for live traffic and for explain's dry run:
 * rule → template → (firewall, #7) → candidates → strategy → plan. It calls no provider and
 * touches no store; dispatch (with breakers and fallback) belongs to the caller.
 */
@Injectable()
export class RoutingService {
  constructor(private readonly config: AppConfig) {
    this.config.gateway.routes.forEach((r, i) => {
      if (!STRATEGIES[r.strategy]) throw new ConfigError(`routes.${i}.strategy`, `strategy "${r.strategy}" is not available in this version`);
    });
  }

  route(input: RoutingInput): RoutingDecision {
    const names = input.model.split(',').map((s) => s.trim());
    if (names.some((n) => n === '')) throw new GatewayError('invalid_request', 'model must not contain empty entries.', { param: 'model' });
    const parts = names.map((name) => this.resolve(name, input.caller.orgId));
    const first = parts[0];
    const random = input.random ?? Math.random;

    // Each part is ordered by its own rule's strategy; a comma list then falls back part by part.
    const seen = new Set<string>();
    const candidates: Candidate[] = [];
    for (const part of parts) {
      const ordered = part.strategy.select(part.targets, { route: part.rule.route, input, random }).ordered;
      for (const c of ordered) {
        if (seen.has(key(c))) continue;
        seen.add(key(c));
        candidates.push(c);
      }
    }
    const template = first.rule.route?.template ? this.config.gateway.templates[first.rule.route.template] : undefined;
    return {
      requestedModel: input.model,
      rule: first.rule,
      strategyId: parts.length > 1 && first.strategy.id === 'direct' ? 'ordered' : first.strategy.id,
      candidates,
      filtered: [],
      plan: candidates.map(({ provider, model }) => ({ provider, model })),
      messages: applyTemplate(input.messages, template, input.inputs),
      insight: {
        routerInvoked: false,
        phase: null,
        weights: null,
        confidence: null,
        confidenceReason: 'no_router_invoked',
        explorationRateEffective: 0,
        usedSharedPoolPrior: false,
        evidence: null,
        firewallBlocked: false,
      },
    };
  }

  /** A route whose `models` names it (first match wins); else a catalogue id or provider/model with the implicit rule. */
  private resolve(name: string, orgId: string): Part {
    const route = this.config.gateway.routes.find((r) => matches(r.orgs, orgId) && matches(r.models, name));
    if (route) return { rule: { name: route.name, implicit: false, route }, strategy: STRATEGIES[route.strategy]!, targets: [...route.targets] };
    const resolved = resolveTarget(name, this.config.gateway.models);
    if (typeof resolved === 'string' || resolved.length === 0) {
      throw new GatewayError('model_not_found', `The model "${name}" does not exist or no route serves it.`, { param: 'model' });
    }
    const chat = resolved.filter((t) => this.config.gateway.models[t.model].type === 'chat');
    if (chat.length === 0) throw new GatewayError('model_not_found', `The model "${name}" is not a chat model.`, { param: 'model' });
    return { rule: { name: `implicit:${name}`, implicit: true }, strategy: directStrategy, targets: chat };
  }
}

export type { RouteSpec };
