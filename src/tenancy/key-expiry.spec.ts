import { makeConfig, memoryLogger, SwitchableCache, SwitchableSql } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import { GatewayError } from '../common/errors/gateway-error';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { Secret } from '../config/secret';
import { ApiKeyHasher } from './api-key-hasher';
import { TenancyRepository } from './tenancy.repository';
import { TenancyService } from './tenancy.service';

/**
 * A key past its `expires_at` (README "Limits") is an unknown key: the same answer (null, so the
 * guard's one 401), reached by the same path, with the same store calls, whether it was never seen,
 * seen while valid (cached here and in the shared cache), or looked up while the analytics store is
 * down (503 for both).
 */
const T0 = Date.UTC(2026, 0, 31, 12, 0, 0);
const YAML = `
organizations:
  acme:
    api_keys:
      - { id: old, key: gw-expired-key, limits: { expires_at: "2026-01-01T00:00:00Z" } }
      - { id: soon, key: gw-expiring-key, limits: { expires_at: "2026-01-31T12:00:01Z", requests_per_minute: 5 } }
      - { id: plain, key: gw-plain-key }
`;

async function rig() {
  const clock = { t: T0 };
  const pglite = await createTestPglite();
  const sql = new SwitchableSql(pglite);
  const cache = new SwitchableCache();
  const metrics = new MetricsService();
  const { logger } = memoryLogger();
  const config = makeConfig(YAML);
  const tenancy = new TenancyService(new TenancyRepository(sql), cache, new ApiKeyHasher(new Secret('pepper')), metrics, new StoreFallback(metrics, logger), config, { now: () => clock.t });
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
  return { tenancy, clock, sql, cache, auth, close: () => pglite.close() };
}

describe('TenancyService: an expired key', () => {
  it('answers and calls the stores exactly as an unknown key, first and second time', async () => {
    const r = await rig();
    try {
      const unknown = [await r.auth('gw-no-such-key'), await r.auth('gw-no-such-key')];
      const expired = [await r.auth('gw-expired-key'), await r.auth('gw-expired-key')];
      expect(unknown[0]).toEqual({ answer: null, calls: { get: 1 }, queries: 1 });
      expect(unknown[1]).toEqual({ answer: null, calls: {}, queries: 0 });
      expect(expired).toEqual(unknown);
    } finally {
      await r.close();
    }
  });

  it('a key that expires while cached everywhere takes the unknown key\'s path at once, and leaves no tombstone', async () => {
    const r = await rig();
    try {
      expect((await r.auth('gw-expiring-key')).answer).toMatchObject({ keyId: 'soon', expiresAt: Date.parse('2026-01-31T12:00:01Z'), limits: { key: { requests_per_minute: 5 } } });
      expect((await r.auth('gw-expiring-key')).queries).toBe(0);
      r.clock.t += 1_000;
      const first = await r.auth('gw-expiring-key');
      expect(first).toEqual({ answer: null, calls: { get: 1 }, queries: 1 });
      expect(await r.auth('gw-expiring-key')).toEqual({ answer: null, calls: {}, queries: 0 });
      // The key itself still works in every other respect: a valid one is untouched.
      expect((await r.auth('gw-plain-key')).answer).toMatchObject({ keyId: 'plain' });
    } finally {
      await r.close();
    }
  });

  it('with the analytics store down, an expired key is 503 like an unknown one, its last known record notwithstanding', async () => {
    const r = await rig();
    try {
      await r.auth('gw-expiring-key');
      await r.auth('gw-plain-key');
      r.clock.t += 1_000;
      r.sql.down = true;
      // Past the local caches: every record is looked up again.
      const fresh = new TenancyService(new TenancyRepository(r.sql), r.cache, new ApiKeyHasher(new Secret('pepper')), new MetricsService(), new StoreFallback(new MetricsService(), memoryLogger().logger), makeConfig(YAML), { now: () => r.clock.t });
      const unavailable = { error: { type: 'error', code: 'internal', message: 'The key store is unavailable.' } };
      await expect(fresh.authenticate('gw-expiring-key')).rejects.toMatchObject({ status: 503, message: unavailable.error.message });
      await expect(fresh.authenticate('gw-no-such-key')).rejects.toMatchObject({ status: 503, message: unavailable.error.message });
      // The same replica, whose own last known record of the key is expired, answers alike.
      expect((await r.auth('gw-expiring-key')).answer).toEqual(unavailable);
      expect((await r.auth('gw-plain-key')).answer).toMatchObject({ keyId: 'plain' });
    } finally {
      await r.close();
    }
  });
});
