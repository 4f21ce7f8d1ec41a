import { tenancyRig } from '../../test/support/tenancy-rig';

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

const rig = () => tenancyRig(YAML, T0);

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
      const fresh = r.fresh();
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
