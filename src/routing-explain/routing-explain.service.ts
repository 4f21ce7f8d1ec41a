import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppLogger } from '../common/logging/logger';
import { ThrottledWarning } from '../common/logging/throttled-warning';
import { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { RoutingService } from '../routing/routing.service';
import type { RoutingDecision } from '../routing/routing.types';
import { mulberry32 } from '../routing/strategies/random';
import { CacheStore, WindowCheck } from '../stores/cache/cache-store';
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

const WINDOW_MS = 60_000;

/** Both windows of one call share the organisation's hash tag, so one script can touch them on Redis Cluster. */
export function explainWindows(caller: Caller, limits: { perOrg: number; perKey: number }): WindowCheck[] {
  const tag = `{org:${caller.orgId}}`;
  return [
    { key: `explain:${tag}:org`, limit: limits.perOrg, windowMs: WINDOW_MS },
    { key: `explain:${tag}:key:${caller.keyId}`, limit: limits.perKey, windowMs: WINDOW_MS },
  ];
}

/** A deterministic draw source per request content, so the same explain call draws the same way (weighted). */
function seededRandom(seed: string): () => number {
  return mulberry32(createHash('sha256').update(seed).digest().readUInt32LE(0));
}

/**
 * `POST /v1/routing/explain` (docs/api.md): validate → spend the explain rate
 * limit (30/min per organisation and 10/min per key, one atomic step, failing closed) → run the
 * routing chain in dry-run mode → map. Nothing else is touched: no provider, no decision trace, no
 * chat rate limit or monthly budget, no breaker, no counter — which is why this service injects
 * only the routing service and the cache store.
 */
@Injectable()
export class RoutingExplainService {
  private readonly warning: ThrottledWarning;

  constructor(
    private readonly routing: RoutingService,
    private readonly cache: CacheStore,
    private readonly config: AppConfig,
    private readonly metrics: MetricsService,
    logger: AppLogger,
  ) {
    this.warning = new ThrottledWarning(logger.pino);
  }

  async explain(q: ExplainQuery): Promise<ExplainResult> {
    const parsed = parseExplainBody(q.body);
    await this.spend(q.caller);
    const decision = await this.dryRun(q, parsed);
    const locale = resolveLocale(q.acceptLanguage);
    return { locale, body: toExplainJson(decision, locale) };
  }

  /** Both windows checked and spent in one atomic step; a denied request spends neither. */
  private async spend(caller: Caller): Promise<void> {
    const { explain_per_minute_per_org: perOrg, explain_per_minute_per_key: perKey } = this.config.gateway.limits;
    const checks = explainWindows(caller, { perOrg, perKey });
    let d;
    try {
      d = await this.cache.hitWindows(checks);
    } catch (err) {
      // Explain's limits fail closed: its cap protects routing internals (docs/architecture.md
      // "Explain's limits fail closed").
      this.metrics.storeErrors.inc({ store: 'cache' });
      this.warning.warn('cache-store:explain-limit', err, { effect: 'routing explain refused (fails closed)' });
      throw new GatewayError('internal', 'Routing explain is unavailable: its rate limiter cannot be reached.', { status: 503 });
    }
    if (d.allowed) return;
    const which = d.deniedIndex === 0 ? `${perOrg} per minute for the organisation` : `${perKey} per minute for this API key`;
    throw new GatewayError('rate_limited', `Routing explain rate limit exceeded: ${which}.`, {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(d.retryAfterMs / 1000))) },
    });
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
