import { Injectable } from '@nestjs/common';
import type { Caller } from '../../common/http/request-context';
import { AppConfig } from '../../config/app-config';
import type { RouteSpec } from '../../config/gateway-config';
import { StatsSnapshot } from '../../learning/model-stats';
import { toExplainJson, type ExplainResponseJson } from '../../routing-explain/explain.mapper';
import { RegressionsView } from '../../routing/regressions/regressions-view';
import { matches, RoutingService } from '../../routing/routing.service';
import { mulberry32, seedOf } from '../../routing/strategies/random';
import { AdminQuery } from '../common/admin-query';
import type { Page } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import { AdminModelJson, RouteViewJson, toModelStatsJson } from './admin-models.mapper';

interface CataloguePair {
  provider: string;
  model: string;
  type: 'chat' | 'embedding';
}

export interface AdminModelsPage extends Page<AdminModelJson> {
  /** When this replica's stats snapshot was last refreshed (the figures are as of then); null before the first. */
  stats_refreshed_at: string | null;
}

/** What an operator can see of a route that could not be dry-run (a template needing inputs, …). */
type RouteOutcome = { spec: RouteSpec; explain: ExplainResponseJson | null };

const ID = /^[A-Za-z0-9._:\/-]{1,256}$/;
/** The neutral request a route is dry-run with: one empty user message (no prompt text is involved). */
const PROBE_MESSAGES = [{ role: 'user' as const, content: '' }];

/**
 * What routing knows about each (provider, model) of the catalogue, for the caller's organisation
 * (docs/api.md "Admin API", models): the learning snapshot's figures for the organisation and the
 * shared pool (the same in-memory snapshot routing reads), its regressions in the penalty window, and
 * for every route of the organisation that lists the pair, what explain would say of a request to
 * that route now: the pair's score and rank, whether it would be picked, and the confidence. Those
 * come from routing's own dry run and explain's mapping, never recomputed here. No store is read.
 */
@Injectable()
export class AdminModelsService {
  constructor(
    private readonly config: AppConfig,
    private readonly stats: StatsSnapshot,
    private readonly regressions: RegressionsView,
    private readonly routing: RoutingService,
  ) {}

  list(caller: Caller, rawQuery: unknown): AdminModelsPage {
    const q = AdminQuery.parse(rawQuery, ['provider', 'model', 'type', 'limit', 'cursor']);
    const provider = q.string('provider', { pattern: ID, what: 'a provider id' });
    const model = q.string('model', { pattern: ID, what: 'a catalogue model id' });
    const type = q.oneOf('type', ['chat', 'embedding'] as const);
    const { limit, cursor } = q.page();
    const scope = ['models', caller.orgId, provider ?? null, model ?? null, type ?? null];
    const after = decodeCursor(cursor, scope, ['text', 'text'] as const);

    const pairs = this.pairs()
      .filter((p) => (provider === undefined || p.provider === provider) && (model === undefined || p.model === model) && (type === undefined || p.type === type))
      .filter((p) => !after || p.provider > after[0] || (p.provider === after[0] && p.model > after[1]))
      .slice(0, limit + 1);
    const routes = this.routesOf(caller, pairs.slice(0, limit));
    const now = new Date();
    const page = pageOf(pairs, limit, scope, (p) => [p.provider, p.model], (p) => this.toJson(caller, p, routes, now));
    return { ...page, stats_refreshed_at: this.stats.refreshedAt?.toISOString() ?? null };
  }

  /** Every (provider, model) of the catalogue, by provider then model. */
  private pairs(): CataloguePair[] {
    const out: CataloguePair[] = [];
    for (const spec of Object.values(this.config.gateway.models)) {
      for (const t of spec.targets) out.push({ provider: t.provider, model: spec.id, type: spec.type });
    }
    return out.sort((a, b) => (a.provider === b.provider ? cmp(a.model, b.model) : cmp(a.provider, b.provider)));
  }

  private toJson(caller: Caller, p: CataloguePair, routes: RouteOutcome[], now: Date): AdminModelJson {
    const spec = this.config.gateway.models[p.model];
    const recent = this.regressions.recent(caller.orgId, p.provider, p.model, now);
    return {
      provider: p.provider,
      model: p.model,
      type: p.type,
      catalogue: { quality: spec.quality ?? null, manual_score: spec.manual_score ?? null, cost: spec.cost ? { ...spec.cost } : null },
      stats: toModelStatsJson(this.stats.get(caller.orgId, p.provider, p.model)),
      pool: toModelStatsJson(this.stats.pool(p.provider, p.model)),
      regressions: { count: recent.length, last_at: recent[0]?.toISOString() ?? null },
      routes: routes.filter((r) => r.spec.targets.some((t) => t.provider === p.provider && t.model === p.model)).map((r) => routeView(r, p)),
    };
  }

  /** The organisation's routes listing one of these pairs, each dry-run once (explain's decision for a request to it). */
  private routesOf(caller: Caller, pairs: readonly CataloguePair[]): RouteOutcome[] {
    const listed = (r: RouteSpec) => pairs.some((p) => r.targets.some((t) => t.provider === p.provider && t.model === p.model));
    const out: RouteOutcome[] = [];
    for (const spec of this.config.gateway.routes) {
      if (!matches(spec.orgs, caller.orgId) || !listed(spec)) continue;
      const name = this.nameReaching(spec, caller.orgId);
      // A route every name of which an earlier route takes serves nothing for this organisation.
      if (name === null) continue;
      out.push({ spec, explain: this.dryRun(caller, spec, name) });
    }
    return out;
  }

  /** A model name whose first matching route, for this organisation, is `spec` (the routing chain's rule step); null when none is. */
  private nameReaching(spec: RouteSpec, orgId: string): string | null {
    for (const name of spec.models) {
      const first = this.config.gateway.routes.find((r) => matches(r.orgs, orgId) && matches(r.models, name));
      if (first === spec) return name;
    }
    return null;
  }

  private dryRun(caller: Caller, spec: RouteSpec, name: string): ExplainResponseJson | null {
    const requestId = `admin-models:${spec.name}`;
    try {
      const decision = this.routing.route({
        caller,
        model: name,
        messages: PROBE_MESSAGES,
        sessionId: null,
        requestId,
        mode: 'dry-run',
        // Weighted routes draw: seeded, so the same page shows the same decision.
        random: mulberry32(seedOf(requestId)),
      });
      return toExplainJson(decision, 'en');
    } catch {
      // A route that cannot be dry-run without the request's own inputs (a template's placeholders):
      // its figures are unknown here, which the answer says with nulls.
      return null;
    }
  }
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function routeView(r: RouteOutcome, p: { provider: string; model: string }): RouteViewJson {
  const e = r.explain;
  const same = (t: { provider: string; model: string }) => t.provider === p.provider && t.model === p.model;
  const rank = e ? e.candidates.findIndex(same) : -1;
  return {
    route: r.spec.name,
    strategy: r.spec.strategy,
    phase: e?.phase ?? null,
    confidence: e?.confidence ?? null,
    confidence_reason: e?.confidence_reason ?? null,
    used_shared_pool_prior: e?.used_shared_pool_prior ?? false,
    score: rank >= 0 ? e!.candidates[rank].score : null,
    rank: rank >= 0 ? rank + 1 : null,
    would_select: e?.would_select ? same(e.would_select) : false,
    filtered_reason: e?.filtered.find(same)?.reason ?? null,
  };
}
