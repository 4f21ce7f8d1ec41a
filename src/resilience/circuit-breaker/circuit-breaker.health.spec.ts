import { startTestApp, TestApp } from '../../../test/support/app';
import { CircuitBreakerService } from './circuit-breaker.service';

const YAML = `
providers:
  mock: { family: mock }
  backup: { family: mock }
models:
  mock-fast: { provider: mock, type: chat }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-1, key: "gw-breaker-health-key" } ]
`;

describe('/health/providers shows the real breaker state', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: YAML });
  });
  afterAll(() => t?.close());

  it('lists an opened breaker as open with the time it half-opens, the others closed', async () => {
    const before = await (await fetch(`${t.url}/health/providers`)).json();
    expect(before).toEqual({
      providers: [
        { id: 'mock', family: 'mock', state: 'closed' },
        { id: 'backup', family: 'mock', state: 'closed' },
      ],
    });
    const breakers = t.app.get(CircuitBreakerService);
    for (let i = 0; i < 5; i++) await breakers.record('mock', false, false);
    const r = await fetch(`${t.url}/health/providers`);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { providers: Array<Record<string, string>> };
    expect(body.providers[1]).toEqual({ id: 'backup', family: 'mock', state: 'closed' });
    expect(body.providers[0]).toMatchObject({ id: 'mock', family: 'mock', state: 'open' });
    const openMs = Date.parse(body.providers[0].open_until) - Date.now();
    expect(openMs).toBeGreaterThan(3_000);
    expect(openMs).toBeLessThanOrEqual(6_000);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/gateway_circuit_breaker_state\{provider="mock"\} 2/);
    expect(metrics).toMatch(/gateway_circuit_breaker_openings_total\{provider="mock"\} 1/);
  });
});
