import { Inject, Injectable, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import { ApiKeyAuthenticator } from '../common/auth/api-key-authenticator';
import { SingleFlight } from '../common/concurrency/single-flight';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { FEATURES, KeyLimits, OrgLimits, Permission } from '../config/gateway-config.schema';
import type { GatewayConfig } from '../config/gateway-config';
import { AppConfig } from '../config/app-config';
import { setBounded } from '../common/bounded-map';
import { stripUndefined } from '../common/options';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback, type StoreName } from '../resilience/store-fallback';
import { CacheStore } from '../stores/cache/cache-store';
import { ApiKeyHasher, generateApiKey, keyPrefix } from './api-key-hasher';
import { KeyCache } from './key-cache';
import { TenancyRepository } from './tenancy.repository';
import type { ApiKeyView, KeyActor, KeyAuditRecord, OrgAuditRecord, OrgRecord, OrgSummary } from './tenancy.records';
import { KeyUsageRecorder } from './key-usage.recorder';

/** How long each layer of the key cache holds a record (tests shorten them). */
export class TenancyOptions {
  /** This replica's cache of known keys. */
  localTtlMs?: number;
  /** This replica's cache of unknown keys. */
  negativeTtlMs?: number;
  /** The shared cache store's copy, read by every replica. */
  sharedTtlMs?: number;
  /** The shared last known record, served only while the analytics store cannot answer. */
  lastKnownTtlMs?: number;
  /** Keys whose last known record this replica keeps. */
  lastKnownMaxKeys?: number;
  /** Milliseconds since the epoch, against which a key's `expires_at` is read (tests move it). */
  now?: () => number;
}

const DEFAULTS = {
  localTtlMs: 10_000,
  negativeTtlMs: 5_000,
  sharedTtlMs: 30_000,
  lastKnownTtlMs: 7 * 86_400_000,
  lastKnownMaxKeys: 100_000,
};

const sharedKey = (hash: string) => `auth:{key:${hash}}`;
const lastKnownKey = (hash: string) => `auth-lk:{key:${hash}}`;
export const DEMO_ORG_ID = 'demo';

/**
 * Organisations and API keys: seeding from config, authentication with caches, key admin.
 *
 * A key is looked up in this replica's cache, then the shared cache store, then the analytics store.
 * Every record the analytics store confirms is also kept as the key's last known record, here and in
 * the cache store; when the analytics store cannot answer (down, frozen, or refused by its store
 * breaker), a key with a last known record keeps authenticating for as long as the outage lasts, and
 * any other key gets 503 at once. A revocation deletes the last known records it can reach, and the
 * first answer of the analytics store after an outage replaces them (docs/operations.md "Store outages").
 */
@Injectable()
export class TenancyService extends ApiKeyAuthenticator {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly local: KeyCache;
  private readonly lastKnown = new Map<string, Caller>();
  /** Lookups under way, by key hash: concurrent requests with the same uncached key share one. */
  private readonly lookups = new SingleFlight<string, Caller | null>();
  private readonly servedLastKnown: Counter<'from'>;
  /** Optional: tools that build the service by hand record no "last used". */
  @Optional() @Inject(KeyUsageRecorder) private readonly usage?: KeyUsageRecorder;

  constructor(
    private readonly repo: TenancyRepository,
    private readonly cache: CacheStore,
    private readonly hasher: ApiKeyHasher,
    metrics: MetricsService,
    private readonly fallback: StoreFallback,
    private readonly config: AppConfig,
    @Optional() options?: TenancyOptions,
  ) {
    super();
    const { now, ...given } = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given };
    this.now = now ?? Date.now;
    this.local = new KeyCache(this.o.localTtlMs, this.o.negativeTtlMs);
    this.servedLastKnown = new Counter({
      name: 'gateway_auth_last_known_total',
      help: 'Keys authenticated from their last known record while the analytics store could not answer (from: local = this replica, shared = the cache store)',
      labelNames: ['from'] as const,
      registers: [metrics.registry],
    });
  }

  /**
   * Upserts the config's organisations and keys (keys hashed), revokes config keys that left the
   * file, and — embedded, with no organisation configured — creates the demo organisation once,
   * returning its key so the caller can print it a single time.
   */
  async seed(config: GatewayConfig, opts: { demo: boolean }): Promise<{ demoKey?: string }> {
    const revoked = await this.repo.transaction(async (tx) => {
      const keyIds: string[] = [];
      for (const org of Object.values(config.organizations)) {
        await this.repo.upsertOrg(
          {
            id: org.id,
            name: org.name,
            plan: org.plan,
            features: [...org.features],
            monthlyRequestLimit: org.monthly_request_limit,
            killSwitches: [...org.kill_switches],
            limits: org.limits,
            source: 'config',
          },
          tx,
        );
        for (const key of org.api_keys) {
          const plain = key.key.reveal();
          await this.repo.upsertKey(
            {
              id: key.id,
              orgId: org.id,
              keyHash: this.hasher.hash(plain),
              keyPrefix: keyPrefix(plain),
              permissions: [...key.permissions],
              source: 'config',
              limits: key.limits,
            },
            tx,
          );
          keyIds.push(key.id);
        }
      }
      const gone = await this.repo.revokeConfigKeysExcept(keyIds, tx);
      for (const r of gone) {
        await this.repo.insertAudit({ orgId: r.orgId, keyId: r.id, action: 'revoked', by: { actor: 'config' }, detail: { reason: 'not in gateway.yaml' } }, tx);
      }
      return gone;
    });
    // Cached callers carry the organisation's plan, features, limits and kill switches: evict every
    // key of a configured organisation, so a changed gateway.yaml applies at once after a restart
    // (other replicas' in-process caches expire within seconds).
    await this.evict(revoked.map((r) => r.hash), true);
    await this.evict(await this.repo.activeKeyHashesOf(Object.keys(config.organizations)), false);

    if (!opts.demo || Object.keys(config.organizations).length > 0) return {};
    if (await this.repo.findOrg(DEMO_ORG_ID)) return {};
    await this.repo.upsertOrg({
      id: DEMO_ORG_ID,
      name: 'Demo organisation',
      plan: 'pro',
      features: [...FEATURES],
      monthlyRequestLimit: null,
      killSwitches: [],
      limits: null,
      source: 'demo',
    });
    // The demo key operates its organisation too (README "Admin API"), so a fresh start can open the console.
    const { key } = await this.createKey(DEMO_ORG_ID, ['read', 'write', 'admin'], 'demo-key', 'demo');
    return { demoKey: key };
  }

  async authenticate(plainKey: string): Promise<Caller | null> {
    const caller = await this.lookup(plainKey);
    // "Last used" is noted in memory and written in batches: no store write per request.
    if (caller) this.usage?.touch(caller.keyId);
    return caller;
  }

  /**
   * An expired key (its `expires_at` passed) is an unknown key, byte for byte and call for call
   * (docs/api.md "Authentication"): a cached record of it counts as no record, so it takes the
   * unknown key's path (this replica's cache, the shared cache, the analytics store) and ends as the
   * same cached "unknown", touching no store an unknown key would not.
   */
  private async lookup(plainKey: string): Promise<Caller | null> {
    const hash = this.hasher.hash(plainKey);
    const cached = this.local.get(hash);
    if (cached !== undefined && !this.expired(cached)) return cached;
    // Requests that arrive together with a key this replica does not hold (a restart under load, a
    // client's first burst) share one lookup, rather than each asking the stores the same question.
    return this.lookups.run(hash, () => this.fetchRecord(hash));
  }

  /** The key's record from the shared cache, else the analytics store, else its last known record (see lookup). */
  private async fetchRecord(hash: string): Promise<Caller | null> {
    const shared = await this.sharedRecord(sharedKey(hash));
    if (shared && !this.expired(shared)) {
      this.local.set(hash, shared);
      setBounded(this.lastKnown, hash, shared, this.o.lastKnownMaxKeys);
      return shared;
    }

    let caller: Caller | null;
    try {
      caller = await this.repo.findCallerByHash(hash, this.config.gateway.stores.analytics_request_timeout_ms);
    } catch (err) {
      this.storeError('analytics', err);
      return this.fromLastKnown(hash);
    }
    if (this.expired(caller)) {
      // No tombstone (an unknown key writes none): every copy of the record carries its expiry.
      this.lastKnown.delete(hash);
      caller = null;
    }
    this.local.set(hash, caller);
    if (caller) {
      setBounded(this.lastKnown, hash, caller, this.o.lastKnownMaxKeys);
      const record = JSON.stringify(caller);
      this.cache.set(sharedKey(hash), record, this.o.sharedTtlMs).catch((err) => this.storeError('cache', err));
      this.cache.set(lastKnownKey(hash), record, this.o.lastKnownTtlMs).catch((err) => this.storeError('cache', err));
    } else if (this.lastKnown.delete(hash)) {
      // Revoked while this replica held it: other replicas must not serve their last known record either.
      this.tombstone([hash]).catch((err) => this.storeError('cache', err));
    }
    return caller;
  }

  /**
   * The analytics store could not answer: the key's last known record, else 503 at once. The shared
   * record is asked first, since it carries revocations other replicas saw (a tombstone); when the
   * cache store cannot answer either, this replica's own record serves.
   */
  private async fromLastKnown(hash: string): Promise<Caller | null> {
    const shared = await this.sharedRecord(lastKnownKey(hash));
    if (shared === null) {
      this.lastKnown.delete(hash);
      this.local.set(hash, null);
      return null;
    }
    let known: Caller | undefined;
    // An expired record is no record: the key answers as an unknown one does during the outage.
    if (shared && !this.expired(shared)) {
      known = shared;
      this.servedLastKnown.inc({ from: 'shared' });
      setBounded(this.lastKnown, hash, shared, this.o.lastKnownMaxKeys);
    } else {
      known = this.lastKnown.get(hash);
      if (known && this.expired(known)) known = undefined;
      if (known) this.servedLastKnown.inc({ from: 'local' });
    }
    if (!known) throw new GatewayError('internal', 'The key store is unavailable.', { status: 503 });
    // Held like a fresh record, so the next requests of this key touch no store until it expires.
    this.local.set(hash, known);
    return known;
  }

  /** The key's `expires_at` has passed (README "Limits"). */
  private expired(caller: Caller | null): boolean {
    return caller?.expiresAt !== undefined && !(caller.expiresAt > this.now());
  }

  /** A record of the cache store; null for a revoked key's tombstone; undefined when it has none or cannot answer. */
  private async sharedRecord(key: string): Promise<Caller | null | undefined> {
    try {
      const text = await this.cache.get(key);
      return text ? (JSON.parse(text) as Caller | null) : undefined;
    } catch (err) {
      this.storeError('cache', err);
      return undefined;
    }
  }

  /**
   * Issues a key; the plain key is returned once and only its hash is stored. The key and its
   * `created` audit row are written in one transaction (docs/architecture.md "Audit events in the
   * same transaction"). `by`: the CLI unless said otherwise (the demo key: the system).
   */
  async createKey(
    orgId: string,
    permissions: Permission[],
    id?: string,
    source: 'cli' | 'demo' | 'api' = 'cli',
    by: KeyActor = { actor: source === 'demo' ? 'system' : 'cli' },
  ): Promise<{ id: string; key: string; view: ApiKeyView }> {
    if (!(await this.repo.findOrg(orgId))) throw new GatewayError('not_found', `No organisation "${orgId}".`);
    const key = generateApiKey();
    const keyId = id ?? `key-${keyPrefix(key).slice(3)}${Date.now().toString(36)}`;
    const view = await this.repo.transaction(async (tx) => {
      const inserted = await this.repo.insertKey({ id: keyId, orgId, keyHash: this.hasher.hash(key), keyPrefix: keyPrefix(key), permissions, source }, tx);
      await this.repo.insertAudit({ orgId, keyId, action: 'created', by, detail: { permissions, source } }, tx);
      return inserted;
    });
    return { id: keyId, key, view };
  }

  /**
   * Revokes a key (the CLI: any organisation's) with its audit row in the same transaction, then
   * evicts it from the shared cache and leaves a tombstone; other replicas' local caches expire
   * within seconds.
   */
  async revokeKey(id: string, by: KeyActor = { actor: 'cli' }): Promise<boolean> {
    const revoked = await this.repo.transaction(async (tx) => {
      const r = await this.repo.revokeKey(id, tx);
      if (r) await this.repo.insertAudit({ orgId: r.orgId, keyId: r.id, action: 'revoked', by, detail: null }, tx);
      return r;
    });
    if (!revoked) return false;
    await this.evict([revoked.hash], true);
    return true;
  }

  /**
   * The Admin API's revoke, scoped to the caller's organisation: null when it has no key of that id
   * (another organisation's key is missing here too). A key from gateway.yaml is the file's to
   * change (409 `config_managed_key`: the next start would restore it). Revoking a revoked key
   * changes nothing and writes no audit row. Same eviction and tombstone as `revokeKey`.
   */
  async revokeOrgKey(orgId: string, id: string, by: KeyActor): Promise<ApiKeyView | null> {
    const outcome = await this.repo.transaction(async (tx) => {
      const found = await this.repo.lockKeyInOrg(orgId, id, tx);
      if (!found) return null;
      if (found.source === 'config') throw new GatewayError('config_managed_key');
      if (found.revokedAt !== null) return { key: found, hash: null };
      const r = await this.repo.revokeKeyInOrg(orgId, id, tx);
      // The row is locked since the read above, so nothing else can have revoked it.
      if (!r) throw new Error(`key ${id} revoked while locked`);
      await this.repo.insertAudit({ orgId, keyId: id, action: 'revoked', by, detail: null }, tx);
      return r;
    });
    if (!outcome) return null;
    if (outcome.hash !== null) await this.evict([outcome.hash], true);
    return outcome.key;
  }

  /**
   * The Admin API's change of a key's controls (README "Limits"), scoped to the caller's
   * organisation: null when it has no key of that id. `change` gets the controls as they are, under
   * the key's row lock, and returns the new ones (it may throw, changing nothing). A key from
   * gateway.yaml is the file's (409 `config_managed_key`). The change and its `limits` audit row
   * (before and after) are one transaction; then the key's cached records are evicted, so its next
   * request reads them (other replicas' in-process caches expire within seconds).
   */
  async changeKeyLimits(orgId: string, id: string, change: (current: KeyLimits | null) => KeyLimits | null, by: KeyActor): Promise<ApiKeyView | null> {
    const outcome = await this.repo.transaction(async (tx) => {
      const found = await this.repo.lockKeyInOrg(orgId, id, tx);
      if (!found) return null;
      if (found.source === 'config') throw new GatewayError('config_managed_key');
      const next = change(found.limits);
      const r = await this.repo.setKeyLimits(orgId, id, next, tx);
      if (!r) throw new Error(`key ${id} vanished while locked`);
      await this.repo.insertAudit({ orgId, keyId: id, action: 'limits', by, detail: { before: found.limits, after: next } }, tx);
      return r;
    });
    if (!outcome) return null;
    await this.evict([outcome.hash], false);
    return outcome.key;
  }

  /** The organisation's record (its controls included); null when there is none. */
  findOrg(orgId: string): Promise<OrgRecord | null> {
    return this.repo.findOrg(orgId);
  }

  /**
   * The Admin API's change of an organisation's controls, as `changeKeyLimits` for a key: under the
   * organisation's row lock, with its `limits` row in `org_audit` in the same transaction. An
   * organisation from gateway.yaml is the file's (409 `config_managed_org`: the next start would
   * restore it). Every key of the organisation is evicted from the key caches afterwards.
   */
  async changeOrgLimits(orgId: string, change: (current: OrgLimits | null) => OrgLimits | null, by: KeyActor): Promise<OrgRecord | null> {
    const changed = await this.repo.transaction(async (tx) => {
      const found = await this.repo.lockOrg(orgId, tx);
      if (!found) return null;
      if (found.source === 'config') throw new GatewayError('config_managed_org');
      const next = change(found.limits);
      await this.repo.setOrgLimits(orgId, next, tx);
      await this.repo.insertOrgAudit({ orgId, action: 'limits', by, detail: { before: found.limits, after: next } }, tx);
      return { ...found, limits: next };
    });
    if (!changed) return null;
    await this.evict(await this.repo.activeKeyHashesOf([orgId]), false);
    return changed;
  }

  /** One page of the organisation's audit rows, oldest first. */
  pageOrgAudit(orgId: string, afterId: string, limit: number): Promise<OrgAuditRecord[]> {
    return this.repo.pageOrgAudit(orgId, afterId, limit);
  }

  /** One page of the organisation's keys, newest first (never a key or its hash). */
  pageKeys(orgId: string, after: { position: string; id: string } | null, revoked: boolean | null, limit: number): Promise<ApiKeyView[]> {
    return this.repo.pageKeys(orgId, after, revoked, limit);
  }

  /** The organisation's key; null when it has none of that id. */
  findKey(orgId: string, id: string): Promise<ApiKeyView | null> {
    return this.repo.findKeyInOrg(orgId, id);
  }

  /** One page of a key's audit rows, oldest first. */
  pageKeyAudit(orgId: string, keyId: string, afterId: string, limit: number): Promise<KeyAuditRecord[]> {
    return this.repo.pageAudit(orgId, keyId, afterId, limit);
  }

  listOrgs(): Promise<OrgSummary[]> {
    return this.repo.listOrgs();
  }

  /**
   * Forgets cached records of these keys, here and in the cache store, so a changed organisation
   * applies at once; revoked keys also get a tombstone as their last known record, so no replica
   * serves them during an outage of the analytics store.
   */
  private async evict(hashes: string[], revoked: boolean): Promise<void> {
    for (const h of hashes) {
      this.local.delete(h);
      this.lastKnown.delete(h);
    }
    if (hashes.length === 0) return;
    // One key per call: each has its own hash tag, and a multi-key DEL across slots fails on Redis Cluster.
    await Promise.all(hashes.map((h) => this.cache.del(sharedKey(h)).catch((err) => this.storeError('cache', err))));
    if (revoked) await this.tombstone(hashes).catch((err) => this.storeError('cache', err));
  }

  private async tombstone(hashes: string[]): Promise<void> {
    await Promise.all(hashes.map((h) => this.cache.set(lastKnownKey(h), 'null', this.o.lastKnownTtlMs)));
  }

  private storeError(store: StoreName, err: unknown): void {
    this.fallback.failed(store, `${store}-store:tenancy`, err);
  }
}
