import { Injectable, Optional } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { assertUnreachable } from '../common/errors/error-catalogue';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppConfig } from '../config/app-config';
import type { TargetRef } from '../config/gateway-config';
import { LimitsService } from '../limits/limits.service';
import { StoreFallback } from '../resilience/store-fallback';
import { CacheStore } from '../stores/cache/cache-store';
import type { CreateExperimentDto, TargetDto } from './dto/create-experiment.dto';
import { ExperimentRegressionSink } from './experiment-regression.sink';
import { DEFAULT_STOP_RULE, type ExperimentRecord, type NewExperiment } from './experiment.record';
import { ExperimentsRepository } from './experiments.repository';
import { setBounded } from '../common/bounded-map';

export class ExperimentsOptions {
  /** Milliseconds since the epoch (tests move it). */
  now?: () => number;
  /** How long `activeFor` serves an organisation's active experiments from process memory. */
  activeCacheTtlMs?: number;
}

/** Aggregate quality and cost of an ended experiment (contract: fields not shown; the stop-rule job fills it). */
export type ExperimentSummary = Record<string, unknown>;

const ACTIVE_CACHE_MAX_ORGS = 10_000;
const DEFAULT_ACTIVE_CACHE_TTL_MS = 1_000;
/** Byte-identical for a missing, malformed or foreign id (contract, rollback 404). */
const NOT_FOUND_MESSAGE = 'No experiment with this id in the organisation.';
const STORE_DOWN_MESSAGE = 'The experiments store is unavailable.';

/**
 * The organisation's experiments version: a fresh random token written after every state change of
 * one of its experiments, by whichever replica made it. Replicas compare it with the token they read
 * with their cached list, so a rollback is seen by every replica on its next request (contract
 * "States and transitions": traffic returns to the baseline immediately). Expiry is harmless: a
 * missing key reads as null, which differs from any token cached with a list.
 */
const versionKey = (orgId: string): string => `exp:{org:${orgId}}:version`;
const VERSION_TTL_MS = 86_400_000;
/** `regressions.reason` of a rolled-back experiment's candidate (docs/architecture.md "Regressions"). */
export const ROLLBACK_REGRESSION_REASON = 'experiment_rolled_back';

/**
 * The Experiments API's rules (docs/api.md "POST /v1/experiments"): validation beyond the DTO, the
 * per-organisation create budget, the state table, and lifecycle events written in the same
 * transaction as the state change they record. Every analytics-store failure is 503
 * `internal` and, the transaction being rolled back, changes nothing (docs/architecture.md "Degrade, never hang").
 *
 * Create budget (`limits.experiment_creates_per_hour`, default 20 per organisation): LimitsService
 * decides it and answers its 429, spent by every create that passed validation (so 409s count). When
 * the cache store fails, the budget is decided in the analytics store instead: inside the create's
 * own transaction, under a per-organisation advisory lock, the experiments created in the last hour
 * are counted. That is shared by every replica and never unlimited; it counts created experiments only.
 */
@Injectable()
export class ExperimentsService {
  private readonly now: () => number;
  private readonly activeTtlMs: number;
  /** `version`: the shared token read before the list was; undefined when the cache store could not be read. */
  private readonly active = new Map<string, { at: number; list: readonly ExperimentRecord[]; version: string | null | undefined }>();

  constructor(
    private readonly repo: ExperimentsRepository,
    private readonly cache: CacheStore,
    private readonly config: AppConfig,
    private readonly limits: LimitsService,
    private readonly fallback: StoreFallback,
    @Optional() options?: ExperimentsOptions,
    @Optional() private readonly regressions?: ExperimentRegressionSink,
  ) {
    this.now = options?.now ?? Date.now;
    this.activeTtlMs = options?.activeCacheTtlMs ?? DEFAULT_ACTIVE_CACHE_TTL_MS;
  }

  /** The caller's organisation's experiments, newest first. */
  list(caller: Caller): Promise<ExperimentRecord[]> {
    return this.analytics(() => this.repo.listForOrg(caller.orgId));
  }

  /**
   * The documented order (docs/api.md "Check order") after the guards and the body cap: schema (DTO) → catalogue, pair and stop-rule
   * rules (`invalid_body`) → `invalid_traffic_pct` → budget (429) → one active per pair (409, held
   * by the database's unique index, so concurrent creates on any replica cannot both win).
   */
  async create(caller: Caller, dto: CreateExperimentDto): Promise<ExperimentRecord> {
    const input = this.validate(caller, dto);
    const budgetShared = await this.limits.spendExperimentCreate(caller.orgId);
    const record = await this.analytics(() =>
      this.repo.transaction(async (tx) => {
        if (!budgetShared) await this.limits.checkExperimentCreatesCounted((windowMs) => this.repo.lockAndCountCreates(caller.orgId, windowMs, tx));
        const created = await this.repo.insertActive(input, tx);
        if (!created) throw new GatewayError('active_already_exists');
        const stopRule = { min_n: input.stopRule.minN, max_regression: input.stopRule.maxRegression };
        await this.repo.insertEvent(
          {
            experimentId: created.id,
            orgId: created.orgId,
            kind: 'created',
            actorApiKeyId: caller.keyId,
            detail: { type: created.type, traffic_pct: created.trafficPct, baseline: created.baseline, candidate: created.candidate, stop_rule: stopRule },
          },
          tx,
        );
        await this.repo.insertEvent({ experimentId: created.id, orgId: created.orgId, kind: 'started', actorApiKeyId: caller.keyId, detail: null }, tx);
        return created;
      }),
    );
    await this.changed(caller.orgId);
    return record;
  }

  /**
   * The contract's state table. active → rolled_back; rolled_back → unchanged, 200, and still an
   * event row (never throttled); completed → 409. A draft (never created by this API) is rolled
   * back like an active one: it never started, and afterwards it never will.
   */
  async rollback(caller: Caller, id: string): Promise<ExperimentRecord> {
    let ended = false;
    const record = await this.analytics(() =>
      this.repo.transaction(async (tx) => {
        const found = await this.repo.lockForOrg(caller.orgId, id, tx);
        if (!found) throw new GatewayError('not_found', NOT_FOUND_MESSAGE);
        const status = found.status;
        switch (status) {
          case 'completed':
            throw new GatewayError('completed_cannot_rollback');
          case 'rolled_back':
            await this.repo.insertEvent({ experimentId: found.id, orgId: found.orgId, kind: 'rolled_back', actorApiKeyId: caller.keyId, detail: { from: status } }, tx);
            return found;
          case 'draft':
          case 'active': {
            const row = await this.repo.end(found.id, 'rolled_back', null, tx);
            // The row is locked since the read above, so nothing else can have ended it.
            if (!row) throw new Error(`experiment ${found.id} ended while locked`);
            await this.repo.insertEvent({ experimentId: found.id, orgId: found.orgId, kind: 'rolled_back', actorApiKeyId: caller.keyId, detail: { from: status } }, tx);
            ended = true;
            return row;
          }
          default:
            return assertUnreachable(status);
        }
      }),
    );
    await this.changed(caller.orgId);
    // Only the call that ended the experiment records the regression; the idempotent repeats do not.
    if (ended) await this.recordRegression(record, { actor: caller.keyId });
    return record;
  }

  /**
   * The stop-rule job's end of an experiment that kept within `max_regression`: active → completed
   * with its summary; event `completed` with no actor key (`detail.actor` = 'system'). Null when
   * the experiment is missing or no longer active (nothing is written then).
   */
  complete(id: string, summary: ExperimentSummary): Promise<ExperimentRecord | null> {
    return this.endBySystem(id, 'completed', summary, { actor: 'system' });
  }

  /** The stop-rule job's rollback: active → rolled_back, event with no actor key and the reason. Null as for `complete`. */
  rollbackBySystem(id: string, reason: string, summary: ExperimentSummary | null = null): Promise<ExperimentRecord | null> {
    return this.endBySystem(id, 'rolled_back', summary, { actor: 'system', reason });
  }

  /** Records an `error` lifecycle event (no actor key) for an existing experiment; false when there is none. */
  async recordError(id: string, detail: Record<string, unknown>): Promise<boolean> {
    return this.analytics(() =>
      this.repo.transaction(async (tx) => {
        const found = await this.repo.lockById(id, tx);
        if (!found) return false;
        await this.repo.insertEvent({ experimentId: found.id, orgId: found.orgId, kind: 'error', actorApiKeyId: null, detail: { actor: 'system', ...detail } }, tx);
        return true;
      }),
    );
  }

  /**
   * The organisation's active experiments, for the chat path. Served from process memory for
   * `activeCacheTtlMs` (default 1 s) and dropped at once on this replica's own writes. While the
   * cached list is not empty, every call also reads the organisation's shared version token from the
   * cache store (one GET) and reloads when another replica changed an experiment since: a rollback
   * anywhere takes traffic back to the baseline on every replica's next request. An empty list is not
   * re-checked (a new experiment starts within the TTL), so organisations without experiments pay
   * nothing. Cache store down: the TTL alone bounds staleness. Analytics store down: the last list
   * seen is kept (no experiment can change state while it is down), else none, and traffic stays on
   * the baseline. Never throws.
   */
  async activeFor(orgId: string): Promise<readonly ExperimentRecord[]> {
    const hit = this.active.get(orgId);
    const fresh = hit !== undefined && this.now() - hit.at < this.activeTtlMs;
    if (fresh && hit.list.length === 0) return hit.list;
    const version = await this.sharedVersion(orgId);
    if (fresh && (version === undefined || version === hit.version)) return hit.list;
    try {
      const list = await this.repo.listActiveForOrg(orgId, this.config.gateway.stores.analytics_request_timeout_ms);
      // The version was read before the list: a change committed in between reloads once more, never less.
      setBounded(this.active, orgId, { at: this.now(), list, version }, ACTIVE_CACHE_MAX_ORGS);
      return list;
    } catch (err) {
      this.fallback.failed('analytics', 'analytics-store:experiments-active', err, { fallback: hit ? 'last known active experiments' : 'no experiment applies' });
      return hit?.list ?? [];
    }
  }

  private async endBySystem(
    id: string,
    status: 'completed' | 'rolled_back',
    summary: ExperimentSummary | null,
    detail: Record<string, unknown>,
  ): Promise<ExperimentRecord | null> {
    const record = await this.analytics(() =>
      this.repo.transaction(async (tx) => {
        const found = await this.repo.lockById(id, tx);
        if (!found || found.status !== 'active') return null;
        const ended = await this.repo.end(found.id, status, summary, tx);
        await this.repo.insertEvent({ experimentId: found.id, orgId: found.orgId, kind: status, actorApiKeyId: null, detail: { ...detail, from: 'active' } }, tx);
        return ended;
      }),
    );
    if (record) {
      await this.changed(record.orgId);
      if (status === 'rolled_back') await this.recordRegression(record, detail);
    }
    return record;
  }

  /** Rules beyond the schema, in the contract's order: every `invalid_body` rule before `invalid_traffic_pct`. */
  private validate(caller: Caller, dto: CreateExperimentDto): NewExperiment {
    const baseline = this.catalogueTarget(dto.baseline, 'baseline');
    const candidate = this.catalogueTarget(dto.candidate, 'candidate');
    if (baseline.provider === candidate.provider && baseline.model === candidate.model) {
      throw new GatewayError('invalid_body', 'The candidate (provider, model) pair must differ from the baseline pair.', { param: 'candidate' });
    }
    const pct = dto.traffic_pct;
    if (!(pct >= 0 && pct <= 100)) throw new GatewayError('invalid_traffic_pct', undefined, { param: 'traffic_pct' });
    return {
      orgId: caller.orgId,
      type: dto.type,
      // JSON's -0 is a number in range; it is stored and returned as 0.
      trafficPct: pct === 0 ? 0 : pct,
      baseline,
      candidate,
      stopRule: {
        minN: dto.stop_rule?.min_n ?? DEFAULT_STOP_RULE.minN,
        maxRegression: dto.stop_rule?.max_regression ?? DEFAULT_STOP_RULE.maxRegression,
      },
      createdByKeyId: caller.keyId,
    };
  }

  /**
   * A side of an experiment is a (provider id, catalogue model id) pair: the provider
   * must be configured, the model must be a chat model of the catalogue, served by that provider.
   */
  private catalogueTarget(t: TargetDto, side: 'baseline' | 'candidate'): TargetRef {
    const { providers, models } = this.config.gateway;
    // Own keys only: "constructor" or "toString" must not find Object.prototype's.
    if (!Object.hasOwn(providers, t.provider)) {
      throw new GatewayError('invalid_body', `${side}.provider: unknown provider "${t.provider}".`, { param: `${side}.provider` });
    }
    const model = Object.hasOwn(models, t.model) ? models[t.model] : undefined;
    if (!model) throw new GatewayError('invalid_body', `${side}.model: unknown model "${t.model}".`, { param: `${side}.model` });
    if (!model.targets.some((m) => m.provider === t.provider)) {
      throw new GatewayError('invalid_body', `${side}.model: model "${t.model}" is not served by provider "${t.provider}".`, { param: `${side}.model` });
    }
    if (model.type !== 'chat') {
      throw new GatewayError('invalid_body', `${side}.model: "${t.model}" is not a chat model; experiments split chat traffic.`, { param: `${side}.model` });
    }
    return { provider: t.provider, model: t.model };
  }

  /** Runs analytics-store work; a store failure becomes 503 `internal`. The gateway's own errors pass through. */
  private async analytics<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      this.fallback.failed('analytics', 'analytics-store:experiments', err);
      throw new GatewayError('internal', STORE_DOWN_MESSAGE, { status: 503, cause: err });
    }
  }

  /** The organisation's shared version token; null when none is set, undefined when the cache store failed. */
  private async sharedVersion(orgId: string): Promise<string | null | undefined> {
    try {
      return await this.cache.get(versionKey(orgId));
    } catch (err) {
      this.fallback.failed('cache', 'cache-store:experiments-version', err, { fallback: `other replicas' changes seen within ${this.activeTtlMs} ms` });
      return undefined;
    }
  }

  /**
   * After a state change of one of the organisation's experiments (committed): this replica forgets
   * its list, and the shared token changes so the other replicas reload on their next request.
   */
  private async changed(orgId: string): Promise<void> {
    this.active.delete(orgId);
    try {
      await this.cache.set(versionKey(orgId), randomUUID(), VERSION_TTL_MS);
    } catch (err) {
      this.fallback.failed('cache', 'cache-store:experiments-version', err, { fallback: `other replicas see the change within ${this.activeTtlMs} ms` });
    }
  }

  /**
   * A rollback, manual or automatic, is a regression of the candidate pair (explain's evidence
   * counts it). Written after the state change committed; a failure here is logged and
   * counted and never undoes or fails the rollback.
   */
  private async recordRegression(e: ExperimentRecord, detail: Record<string, unknown>): Promise<void> {
    if (!this.regressions) return;
    try {
      await this.regressions.record(e.orgId, e.candidate.provider, e.candidate.model, ROLLBACK_REGRESSION_REASON, {
        experiment_id: e.id,
        experiment_type: e.type,
        baseline: { provider: e.baseline.provider, model: e.baseline.model },
        ...detail,
      });
    } catch (err) {
      this.fallback.failed('analytics', 'analytics-store:experiment-regression', err, { experiment_id: e.id, effect: 'regression not recorded' });
    }
  }
}
