import { Injectable } from '@nestjs/common';
import { ApiKeyAuthenticator } from '../common/auth/api-key-authenticator';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppLogger } from '../common/logging/logger';
import { ThrottledWarning } from '../common/logging/throttled-warning';
import { FEATURES, Permission } from '../config/gateway-config.schema';
import type { GatewayConfig } from '../config/gateway-config';
import { MetricsService } from '../metrics/metrics.service';
import { CacheStore } from '../stores/cache/cache-store';
import { ApiKeyHasher, generateApiKey, keyPrefix } from './api-key-hasher';
import { KeyCache } from './key-cache';
import { TenancyRepository } from './tenancy.repository';
import type { OrgSummary } from './tenancy.records';

const SHARED_TTL_MS = 30_000;
const sharedKey = (hash: string) => `auth:{key:${hash}}`;
export const DEMO_ORG_ID = 'demo';

/** Organisations and API keys: seeding from config, authentication with caches, key admin. */
@Injectable()
export class TenancyService extends ApiKeyAuthenticator {
  private readonly local = new KeyCache();
  private readonly degraded: ThrottledWarning;

  constructor(
    private readonly repo: TenancyRepository,
    private readonly cache: CacheStore,
    private readonly hasher: ApiKeyHasher,
    private readonly metrics: MetricsService,
    logger: AppLogger,
  ) {
    super();
    this.degraded = new ThrottledWarning(logger.pino);
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
            monthlyRequestLimit: org.monthlyRequestLimit,
            killSwitches: [...org.killSwitches],
            source: 'config',
          },
          tx,
        );
        for (const key of org.apiKeys) {
          const plain = key.key.reveal();
          await this.repo.upsertKey(
            { id: key.id, orgId: org.id, keyHash: this.hasher.hash(plain), keyPrefix: keyPrefix(plain), permissions: [...key.permissions], source: 'config' },
            tx,
          );
          keyIds.push(key.id);
        }
      }
      return this.repo.revokeConfigKeysExcept(keyIds, tx);
    });
    // Cached callers carry the organisation's plan, features, limits and kill switches: evict every
    // key of a configured organisation, so a changed gateway.yaml applies at once after a restart
    // (other replicas' in-process caches expire within seconds).
    await this.evict([...revoked, ...(await this.repo.activeKeyHashesOf(Object.keys(config.organizations)))]);

    if (!opts.demo || Object.keys(config.organizations).length > 0) return {};
    if (await this.repo.findOrg(DEMO_ORG_ID)) return {};
    await this.repo.upsertOrg({
      id: DEMO_ORG_ID,
      name: 'Demo organisation',
      plan: 'pro',
      features: [...FEATURES],
      monthlyRequestLimit: null,
      killSwitches: [],
      source: 'demo',
    });
    const { key } = await this.createKey(DEMO_ORG_ID, ['read', 'write'], 'demo-key', 'demo');
    return { demoKey: key };
  }

  async authenticate(plainKey: string): Promise<Caller | null> {
    const hash = this.hasher.hash(plainKey);
    const cached = this.local.get(hash);
    if (cached !== undefined) return cached;

    try {
      const shared = await this.cache.get(sharedKey(hash));
      if (shared) {
        const caller = JSON.parse(shared) as Caller;
        this.local.set(hash, caller);
        return caller;
      }
    } catch (err) {
      this.storeError('cache', err);
    }

    let caller: Caller | null;
    try {
      caller = await this.repo.findCallerByHash(hash);
    } catch (err) {
      this.storeError('analytics', err);
      throw new GatewayError('internal', 'The key store is unavailable.', { status: 503 });
    }
    this.local.set(hash, caller);
    if (caller) this.cache.set(sharedKey(hash), JSON.stringify(caller), SHARED_TTL_MS).catch((err) => this.storeError('cache', err));
    return caller;
  }

  /** Issues a key; the plain key is returned once and only its hash is stored. */
  async createKey(orgId: string, permissions: Permission[], id?: string, source: 'cli' | 'demo' = 'cli'): Promise<{ id: string; key: string }> {
    if (!(await this.repo.findOrg(orgId))) throw new GatewayError('not_found', `No organisation "${orgId}".`);
    const key = generateApiKey();
    const keyId = id ?? `key-${keyPrefix(key).slice(3)}${Date.now().toString(36)}`;
    await this.repo.insertKey({ id: keyId, orgId, keyHash: this.hasher.hash(key), keyPrefix: keyPrefix(key), permissions, source });
    return { id: keyId, key };
  }

  /** Revokes a key and evicts it from the shared cache; other replicas' local caches expire within seconds. */
  async revokeKey(id: string): Promise<boolean> {
    const hash = await this.repo.revokeKey(id);
    if (!hash) return false;
    await this.evict([hash]);
    return true;
  }

  listOrgs(): Promise<OrgSummary[]> {
    return this.repo.listOrgs();
  }

  private async evict(hashes: string[]): Promise<void> {
    for (const h of hashes) this.local.delete(h);
    if (hashes.length === 0) return;
    // One key per call: each has its own hash tag, and a multi-key DEL across slots fails on Redis Cluster.
    await Promise.all(hashes.map((h) => this.cache.del(sharedKey(h)).catch((err) => this.storeError('cache', err))));
  }

  private storeError(store: 'cache' | 'analytics', err: unknown): void {
    this.metrics.storeErrors.inc({ store });
    this.degraded.warn(`${store}-store:tenancy`, err);
  }
}
