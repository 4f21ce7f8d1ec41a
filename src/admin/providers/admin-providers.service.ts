import { Injectable } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import { ownValue } from '../../common/own-key';
import type { Caller } from '../../common/http/request-context';
import { AppConfig } from '../../config/app-config';
import { CircuitBreakerService, type BreakerTransition, type ProviderBreakerState } from '../../resilience/circuit-breaker/circuit-breaker.service';
import { StoreFallback } from '../../resilience/store-fallback';
import { AdminQuery } from '../common/admin-query';
import { fromAnalytics, type Page } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import type { ProviderTraffic } from './admin-providers.repository';
import { AdminProvidersRepository } from './admin-providers.repository';

const NOT_FOUND_MESSAGE = 'No provider with this id.';
const DEFAULT_SPAN_MS = 3_600_000;
/** Transitions per provider in a list, and in one provider's answer. */
const LIST_TRANSITIONS = 10;
const ONE_TRANSITIONS = 100;

export interface TransitionJson {
  at: string;
  from: string | null;
  to: string;
  /** The failure that opened it (upstream error kind and status), when the replica that opened it reported one. */
  cause: { error: string; status: number | null } | null;
  open_until: string | null;
  openings: number;
  replica: string;
}

export interface AdminProviderJson {
  id: string;
  family: string;
  /** The breaker now: closed, open (until), or half_open (its open time over; a probe decides). */
  breaker: { state: string; open_until: string | null; consecutive_failures: number };
  /** Newest first: every replica's with a shared cache store, else this replica's (docs/api.md "Admin API", providers). */
  transitions: TransitionJson[];
  /** The organisation's calls to the provider in the window, and its failures among them. */
  traffic: { requests: number; errors: number; error_rate: number | null };
}

export interface AdminProvidersPage extends Page<AdminProviderJson> {
  window: { from: string; to: string };
}

/**
 * Providers for operators (docs/api.md "Admin API", providers): each configured provider's circuit
 * breaker now (the shared state, as /health/providers reads it), its recent transitions, and the
 * organisation's request and error counts from its decision traces. Breakers are per provider, not
 * per organisation: what a transition records is the provider's state and the upstream failure's
 * kind and status, never a request, organisation or key.
 */
@Injectable()
export class AdminProvidersService {
  constructor(
    private readonly config: AppConfig,
    private readonly breakers: CircuitBreakerService,
    private readonly traffic: AdminProvidersRepository,
    private readonly fallback: StoreFallback,
  ) {}

  async list(caller: Caller, rawQuery: unknown): Promise<AdminProvidersPage> {
    const q = AdminQuery.parse(rawQuery, ['from', 'to', 'limit', 'cursor']);
    const { from, to, asGiven } = q.range(new Date(), DEFAULT_SPAN_MS);
    const { limit, cursor } = q.page();
    const scope = ['providers', caller.orgId, asGiven];
    const after = decodeCursor(cursor, scope, ['text'] as const);
    const ids = Object.keys(this.config.gateway.providers)
      .sort()
      .filter((id) => !after || id > after[0])
      .slice(0, limit + 1);
    const shown = ids.slice(0, limit);
    const [states, traffic] = await Promise.all([this.breakers.states(), this.trafficOf(caller, from, to)]);
    const transitions = await Promise.all(shown.map((id) => this.breakers.recentTransitions(id, LIST_TRANSITIONS)));
    const byId = new Map(shown.map((id, i) => [id, transitions[i]]));
    const page = pageOf(ids, limit, scope, (id) => [id], (id) => this.toJson(id, states[id], byId.get(id) ?? [], traffic));
    return { ...page, window: { from: from.toISOString(), to: to.toISOString() } };
  }

  async get(caller: Caller, id: string, rawQuery: unknown): Promise<AdminProviderJson & { window: { from: string; to: string } }> {
    const q = AdminQuery.parse(rawQuery, ['from', 'to']);
    const { from, to } = q.range(new Date(), DEFAULT_SPAN_MS);
    if (!ownValue(this.config.gateway.providers, id)) throw new GatewayError('not_found', NOT_FOUND_MESSAGE);
    const [states, traffic, transitions] = await Promise.all([this.breakers.states(), this.trafficOf(caller, from, to), this.breakers.recentTransitions(id, ONE_TRANSITIONS)]);
    return { ...this.toJson(id, states[id], transitions, traffic), window: { from: from.toISOString(), to: to.toISOString() } };
  }

  private trafficOf(caller: Caller, from: Date, to: Date): Promise<ProviderTraffic[]> {
    return fromAnalytics(this.fallback, 'providers', () => this.traffic.traffic(caller.orgId, from, to));
  }

  private toJson(id: string, state: ProviderBreakerState | undefined, transitions: BreakerTransition[], traffic: ProviderTraffic[]): AdminProviderJson {
    const t = traffic.find((x) => x.provider === id);
    const requests = t?.requests ?? 0;
    const errors = t?.errors ?? 0;
    return {
      id,
      family: this.config.gateway.providers[id].family,
      breaker: { state: state?.state ?? 'closed', open_until: state?.openUntil ?? null, consecutive_failures: state?.consecutiveFailures ?? 0 },
      transitions: transitions.map((x) => ({ at: x.at, from: x.from, to: x.to, cause: x.cause, open_until: x.openUntil, openings: x.openings, replica: x.replica })),
      traffic: { requests, errors, error_rate: requests > 0 ? errors / requests : null },
    };
  }
}
