import { ownValue } from '../common/own-key';
import { Injectable } from '@nestjs/common';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { DrainState } from '../common/lifecycle/drain-state';
import { AppConfig } from '../config/app-config';
import { BreakerState, CircuitBreakerService } from '../resilience/circuit-breaker/circuit-breaker.service';
import { CacheStore } from '../stores/cache/cache-store';
import { SqlStore } from '../stores/sql/sql-store';
import { VectorStore } from '../stores/vector/vector-store';
import { errorMessage } from '../common/errors/error-message';

export type StoreName = 'cache' | 'analytics' | 'vector';
export interface StoreHealth {
  status: 'up' | 'down';
  kind: string;
  reason?: string;
}
export interface Readiness {
  status: 'ok' | 'degraded' | 'down';
  draining: boolean;
  stores: Record<StoreName, StoreHealth>;
}

const PROBE_TIMEOUT_MS = 1_000;
const READY_CACHE_MS = 1_500;


/**
 * Probes of the stores (docs/api.md "Health"). Readiness is 503 only while the pod drains;
 * a store outage is `degraded` with 200, since chat keeps serving through it and an outage every
 * replica sees must not empty the load balancer.
 * Results are cached briefly so a flood of probes does not reach the stores.
 */
@Injectable()
export class HealthService {
  private readyCache?: { at: number; value: Promise<Readiness['stores']> };

  constructor(
    private readonly sql: SqlStore,
    private readonly cache: CacheStore,
    private readonly vector: VectorStore,
    private readonly drain: DrainState,
    private readonly config: AppConfig,
    private readonly indicators: HealthIndicatorService,
    private readonly breakers: CircuitBreakerService,
  ) {}

  async store(name: StoreName): Promise<StoreHealth> {
    switch (name) {
      case 'cache':
        return this.probe(this.cache.kind, () => this.cache.ping(PROBE_TIMEOUT_MS));
      case 'analytics':
        return this.probe(this.sql.kind, () => this.sql.ping(PROBE_TIMEOUT_MS));
      case 'vector': {
        const s = await this.vector.status(PROBE_TIMEOUT_MS).catch((err) => ({ up: false, reason: errorMessage(err) }));
        return s.up ? { status: 'up', kind: this.vector.kind } : { status: 'down', kind: this.vector.kind, reason: s.reason };
      }
    }
  }

  /** The terminus-shaped indicator of one store: `{ cache: { status, kind, reason? } }`. */
  async indicator(name: StoreName): Promise<HealthIndicatorResult> {
    const h = await this.store(name);
    const check = this.indicators.check(name);
    return h.status === 'up' ? check.up({ kind: h.kind }) : check.down({ kind: h.kind, reason: h.reason });
  }

  async readiness(): Promise<Readiness> {
    const now = Date.now();
    if (!this.readyCache || now - this.readyCache.at > READY_CACHE_MS) {
      this.readyCache = { at: now, value: this.probeAll() };
    }
    const stores = await this.readyCache.value;
    const draining = this.drain.isDraining;
    // A store outage is `degraded`, never `down`: every replica sees the same outage, and a 503 from
    // all of them would empty the load balancer while chat still serves (known keys authenticate
    // from their last known records; docs/operations.md "Store outages"). Only draining takes a pod out.
    const status = draining ? 'down' : Object.values(stores).some((s) => s.status === 'down') ? 'degraded' : 'ok';
    return { status, draining, stores };
  }

  /** Each configured provider with its circuit-breaker state, and when an open breaker half-opens. */
  async providers(): Promise<{ providers: Array<{ id: string; family: string; state: BreakerState; open_until?: string }> }> {
    const states = await this.breakers.states();
    return {
      providers: Object.values(this.config.gateway.providers).map((p) => {
        const s = ownValue(states, p.id) ?? { state: 'closed' as const };
        const entry = { id: p.id, family: p.family, state: s.state };
        return s.state === 'open' && s.openUntil ? { ...entry, open_until: s.openUntil } : entry;
      }),
    };
  }

  private async probeAll(): Promise<Readiness['stores']> {
    const [cache, analytics, vector] = await Promise.all([this.store('cache'), this.store('analytics'), this.store('vector')]);
    return { cache, analytics, vector };
  }

  private async probe(kind: string, ping: () => Promise<void>): Promise<StoreHealth> {
    try {
      await ping();
      return { status: 'up', kind };
    } catch (err) {
      return { status: 'down', kind, reason: errorMessage(err) };
    }
  }
}
