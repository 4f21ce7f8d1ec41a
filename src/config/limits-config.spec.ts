import { thrownBy } from '../../test/support/kit';
import { loadGatewayConfig } from './gateway-config';
import { ConfigError } from './schema';

/** The controls of README "Limits" in gateway.yaml: organizations.<org>.limits and api_keys[].limits. */
const BASE = `
providers: { mock: { family: mock }, alt: { family: mock } }
models:
  fast: { provider: mock }
  both: { providers: { mock: {}, alt: {} } }
routes:
  - { name: default, models: [auto], targets: [mock/fast] }
`;
const load = (orgs: string) => loadGatewayConfig(`${BASE}organizations:\n${orgs}`, {});
const problem = (orgs: string): string => thrownBy(() => load(orgs), ConfigError).message;

describe('organizations.<org>.limits and api_keys[].limits', () => {
  it('are null when absent, and read as given', () => {
    const c = load(`
  acme:
    limits: { requests_per_minute: 600, tokens_per_minute: 100000, monthly_budget_usd: 250.5, models: [fast, auto, alt/both] }
    api_keys:
      - { id: k1, key: gw-1, limits: { requests_per_minute: 0, models: [mock/fast], expires_at: "2026-01-31T00:00:00Z" } }
      - { id: k2, key: gw-2 }
  plain: {}
`);
    expect(c.organizations.acme.limits).toEqual({ requests_per_minute: 600, tokens_per_minute: 100000, monthly_budget_usd: 250.5, models: ['fast', 'auto', 'alt/both'] });
    expect(c.organizations.acme.api_keys[0].limits).toEqual({ requests_per_minute: 0, models: ['mock/fast'], expires_at: '2026-01-31T00:00:00Z' });
    expect(c.organizations.acme.api_keys[1].limits).toBeNull();
    expect(c.organizations.plain.limits).toBeNull();
    expect(c.limits.default_completion_tokens).toBe(256);
  });

  it('refuse what is not a control, a bad value, and expires_at without a zone, naming the field', () => {
    expect(problem(`  acme: { limits: { rpm: 5 } }`)).toMatch(/^organizations\.acme\.limits\.rpm: unknown key/);
    expect(problem(`  acme: { limits: { expires_at: "2026-01-01T00:00:00Z" } }`)).toMatch(/^organizations\.acme\.limits\.expires_at: unknown key/);
    expect(problem(`  acme: { limits: { tokens_per_minute: -1 } }`)).toMatch(/^organizations\.acme\.limits\.tokens_per_minute: must be at least 0/);
    expect(problem(`  acme: { limits: { monthly_budget_usd: "10" } }`)).toMatch(/monthly_budget_usd: expected a number/);
    expect(problem(`  acme: { limits: { models: [] } }`)).toMatch(/limits\.models: must have at least 1/);
    expect(problem(`  acme: { api_keys: [ { id: k, key: x, limits: { expires_at: "2026-01-31 00:00" } } ] }`)).toMatch(
      /^organizations\.acme\.api_keys\.0\.limits\.expires_at: must be an ISO 8601 time with a zone/,
    );
  });

  it('refuse a models entry that names nothing a request can name, and a comma list', () => {
    expect(problem(`  acme: { limits: { models: [fast, nope] } }`)).toMatch(/^organizations\.acme\.limits\.models\.1: names no catalogue model/);
    expect(problem(`  acme: { api_keys: [ { id: k, key: x, limits: { models: [alt/fast] } } ] }`)).toMatch(/^organizations\.acme\.api_keys\.0\.limits\.models\.0: /);
    expect(problem(`  acme: { limits: { models: ["fast,auto"] } }`)).toMatch(/models\.0: "fast,auto" is a comma list/);
    expect(problem(`  acme: { limits: { models: ["*"] } }`)).toMatch(/models\.0: names no catalogue model/);
  });
});
