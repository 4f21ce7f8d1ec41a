import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { LimitsService } from '../limits/limits.service';
import { RoutingService } from '../routing/routing.service';
import type { RoutingDecision } from '../routing/routing.types';
import { mulberry32 } from '../routing/strategies/random';
import { Locale, resolveLocale } from './accept-language';
import { asInvalidBody, ExplainCall, parseExplainBody } from './explain-request';
import { ExplainResponseJson, toExplainJson } from './explain.mapper';

export interface ExplainQuery {
  caller: Caller;
  /** The parsed JSON body (the route's 64 KiB cap already applied). */
  body: unknown;
  acceptLanguage: string | string[] | undefined;
  requestId: string;
}

export interface ExplainResult {
  /** The locale `explanation.text` is written in: the `Content-Language` header. */
  locale: Locale;
  body: ExplainResponseJson;
}

/** A deterministic draw source per request content, so the same explain call draws the same way (weighted). */
function seededRandom(seed: string): () => number {
  return mulberry32(createHash('sha256').update(seed).digest().readUInt32LE(0));
}

/**
 * `POST /v1/routing/explain` (docs/api.md): validate → spend the explain rate limit
 * (LimitsService.checkExplain: 30/min per organisation and 10/min per key, one atomic step, failing
 * closed) → run the routing chain in dry-run mode → map. Nothing else is touched: no provider, no
 * decision trace, no chat rate limit or monthly budget, no breaker, no counter — which is why this
 * service takes only two things: the routing service (its dry run) and the limits service (whose
 * explain limit is all it spends).
 */
@Injectable()
export class RoutingExplainService {
  constructor(
    private readonly routing: RoutingService,
    private readonly limits: LimitsService,
  ) {}

  async explain(q: ExplainQuery): Promise<ExplainResult> {
    const parsed = parseExplainBody(q.body);
    await this.limits.checkExplain(q.caller);
    const decision = await this.dryRun(q, parsed);
    const locale = resolveLocale(q.acceptLanguage);
    return { locale, body: toExplainJson(decision, locale) };
  }

  private async dryRun(q: ExplainQuery, parsed: ExplainCall): Promise<RoutingDecision> {
    const { call, headers, sessionId } = parsed;
    try {
      return await this.routing.route({
        caller: q.caller,
        model: call.model,
        messages: call.request.messages,
        inputs: call.inputs,
        maxCompletionTokens: call.request.max_completion_tokens,
        headers,
        sessionId,
        requestId: q.requestId,
        mode: 'dry-run',
        random: seededRandom(JSON.stringify([q.caller.orgId, call.model, sessionId, call.request.messages])),
      });
    } catch (err) {
      // Contract: no rule for the organisation and model is 404 no_route (chat says model_not_found).
      if (err instanceof GatewayError && (err.code === 'model_not_found' || err.code === 'no_route')) throw new GatewayError('no_route');
      throw asInvalidBody(err);
    }
  }
}
