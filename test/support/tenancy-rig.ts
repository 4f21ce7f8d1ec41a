import { GatewayError } from '../../src/common/errors/gateway-error';
import { Secret } from '../../src/config/secret';
import { MetricsService } from '../../src/metrics/metrics.service';
import { StoreFallback } from '../../src/resilience/store-fallback';
import { ApiKeyHasher } from '../../src/tenancy/api-key-hasher';
import { TenancyRepository } from '../../src/tenancy/tenancy.repository';
import { TenancyService } from '../../src/tenancy/tenancy.service';
import { makeConfig, memoryLogger, SwitchableCache, SwitchableSql } from './kit';
import { createTestPglite } from './pglite';

/**
 * A TenancyService over an in-memory PGlite and cache store, seeded from `yaml`, on a clock the test
 * moves; `auth` reports one authentication's answer and the store calls it made, `fresh` builds
 * another replica over the same stores.
 */
export async function tenancyRig(yaml: string, t0 = Date.now()) {
  const clock = { t: t0 };
  const pglite = await createTestPglite();
  const sql = new SwitchableSql(pglite);
  const cache = new SwitchableCache();
  const metrics = new MetricsService();
  const { logger } = memoryLogger();
  const config = makeConfig(yaml);
  const tenancy = new TenancyService(new TenancyRepository(sql), cache, new ApiKeyHasher(new Secret('pepper')), metrics, new StoreFallback(metrics, logger), config, { now: () => clock.t });
  /** Another replica over the same stores: none of this one's local caches. */
  const fresh = () => {
    const m = new MetricsService();
    return new TenancyService(new TenancyRepository(sql), cache, new ApiKeyHasher(new Secret('pepper')), m, new StoreFallback(m, memoryLogger().logger), makeConfig(yaml), { now: () => clock.t });
  };
  await tenancy.seed(config.gateway, { demo: false });
  /** What one authentication did: its answer and the store calls it made. */
  const auth = async (key: string) => {
    const [c0, s0] = [{ ...cache.callsOf }, sql.queries];
    let answer: unknown;
    try {
      answer = await tenancy.authenticate(key);
    } catch (err) {
      answer = err instanceof GatewayError ? err.toBody() : err;
    }
    const calls = Object.fromEntries(Object.entries(cache.callsOf).map(([k, v]) => [k, v - c0[k as keyof typeof c0]]).filter(([, n]) => n !== 0));
    return { answer, calls, queries: sql.queries - s0 };
  };
  return { tenancy, fresh, clock, sql, cache, auth, close: () => pglite.close() };
}
