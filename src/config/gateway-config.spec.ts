import { thrownBy } from '../../test/support/kit';
import { loadGatewayConfig } from './gateway-config';
import { loadEnv } from './env';
import { ConfigError } from './schema';
import { Secret } from './secret';
import { inspect } from 'node:util';

const base = `
providers:
  openai: { family: openai, base_url: https://api.openai.com/v1, api_key: "\${OPENAI_API_KEY}" }
  local: { family: mock }
models:
  gpt-4o-mini: { provider: openai, upstream: gpt-4o-mini-2024, cost: { input_per_mtok: 0.15, output_per_mtok: 0.6 }, quality: 0.72 }
  llama:
    providers: { openai: { upstream: llama-x }, local: {} }
routes:
  - { name: default, models: [auto], strategy: ordered, targets: [openai/gpt-4o-mini, llama] }
`;

const errorOf = (text: string, env: Record<string, string> = { OPENAI_API_KEY: 'sk-test' }): string => thrownBy(() => loadGatewayConfig(text, env), ConfigError).message;

describe('loadGatewayConfig', () => {
  it('loads a valid file, expands ${VAR} and resolves targets', () => {
    const cfg = loadGatewayConfig(base, { OPENAI_API_KEY: 'sk-test' });
    expect(cfg.providers.openai.api_key?.reveal()).toBe('sk-test');
    expect(cfg.models['gpt-4o-mini'].targets).toEqual([{ provider: 'openai', upstream: 'gpt-4o-mini-2024', timeouts: expect.any(Object) }]);
    expect(cfg.models.llama.targets.map((t) => [t.provider, t.upstream])).toEqual([['openai', 'llama-x'], ['local', 'llama']]);
    expect(cfg.routes[0].targets).toEqual([
      { provider: 'openai', model: 'gpt-4o-mini' },
      { provider: 'openai', model: 'llama' },
      { provider: 'local', model: 'llama' },
    ]);
    expect(cfg.limits.requests_per_minute_per_key).toBeNull();
    expect(Object.isFrozen(cfg.routes[0])).toBe(true);
  });

  it('refuses invalid YAML with the line', () => {
    expect(errorOf('providers:\n  a: [1, 2\n')).toMatch(/^invalid YAML at line \d+, column \d+: /);
  });

  it('refuses an unknown key with its path', () => {
    expect(errorOf(base.replace('family: mock', 'family: mock, colour: red'))).toBe(
      'providers.local.colour: unknown key (allowed: family, base_url, api_key, api_version, headers, timeouts, max_response_bytes)',
    );
  });

  it('names a missing ${VAR}', () => {
    expect(errorOf(base, {})).toBe('providers.openai.api_key: environment variable OPENAI_API_KEY is not set');
  });

  it('names an unknown provider in a model', () => {
    expect(errorOf(base.replace('{ provider: openai, upstream', '{ provider: opnai, upstream'))).toBe(
      'models.gpt-4o-mini.provider: unknown provider "opnai"',
    );
  });

  it('names an unknown route target, a bad enum and a range error', () => {
    expect(errorOf(base.replace('targets: [openai/gpt-4o-mini', 'targets: [openai/gpt-5'))).toBe(
      'routes.0.targets.0: unknown target "openai/gpt-5" (no catalogue model "gpt-5" served by provider "openai")',
    );
    expect(errorOf(base.replace('family: mock', 'family: bedrock'))).toMatch(/^providers\.local\.family: must be one of openai, .*got "bedrock"$/);
    expect(errorOf(base.replace('quality: 0.72', 'quality: 1.5'))).toBe('models.gpt-4o-mini.quality: must be at most 1, got 1.5');
  });

  it('refuses duplicate YAML keys and bad firewall regexes', () => {
    expect(errorOf('providers: {}\nproviders: {}\n')).toMatch(/^invalid YAML at line 2/);
    expect(errorOf(`${base}firewall: { rules: [ { id: x, pattern: "(", action: block } ] }\n`)).toMatch(
      /^firewall\.rules\.0\.pattern: invalid regular expression/,
    );
  });

  it('organisations: defaults, and api keys kept as secrets', () => {
    const cfg = loadGatewayConfig(
      `${base}organizations:\n  acme:\n    plan: pro\n    features: [explain]\n    api_keys: [ { id: k1, key: "\${K}" } ]\n`,
      { OPENAI_API_KEY: 'x', K: 'gw-plain-key' },
    );
    const org = cfg.organizations.acme;
    expect(org).toMatchObject({ plan: 'pro', features: ['explain'], monthly_request_limit: null, kill_switches: [] });
    expect(org.api_keys[0].permissions).toEqual(['read', 'write']);
    expect(JSON.stringify(cfg)).not.toContain('gw-plain-key');
    expect(inspect(cfg, { depth: 10 })).not.toContain('gw-plain-key');
  });
});

describe('loadEnv', () => {
  it('applies the documented defaults', () => {
    expect(loadEnv({})).toMatchObject({ port: 8080, configPath: 'config/gateway.yaml', dataDir: '.gateway-data', logLevel: 'info' });
  });
  it('requires a pepper with DATABASE_URL and validates PORT', () => {
    expect(() => loadEnv({ DATABASE_URL: 'postgres://x' })).toThrow('GATEWAY_KEY_PEPPER: is required when DATABASE_URL is set');
    expect(() => loadEnv({ PORT: 'eighty' })).toThrow('PORT: must be an integer from 0 to 65535, got "eighty"');
    const env = loadEnv({ DATABASE_URL: 'postgres://x', GATEWAY_KEY_PEPPER: 'p' });
    expect(env.vectorDatabaseUrl).toBe('postgres://x');
    expect(env.keyPepper).toBeInstanceOf(Secret);
  });
});

describe('models.<id>.structured_output', () => {
  const yaml = (models: string) => `
providers:
  claude: { family: anthropic, api_key: k }
  gem: { family: gemini, api_key: k }
  oai: { family: openai, api_key: k }
models:
${models}
`;
  const targetsOf = (models: string, id: string) => loadGatewayConfig(yaml(models), {}).models[id].targets.map((t) => [t.provider, t.structured_output]);

  it('is absent by default (the family decides), set per model, and overridden per provider', () => {
    expect(targetsOf('  m: { provider: claude }', 'm')).toEqual([['claude', undefined]]);
    expect(targetsOf('  m: { provider: claude, structured_output: native }', 'm')).toEqual([['claude', 'native']]);
    expect(targetsOf('  m: { structured_output: native, providers: { claude: { structured_output: forced_tool }, oai: {} } }', 'm')).toEqual([
      ['claude', 'forced_tool'],
      ['oai', 'native'],
    ]);
  });

  it('refuses an unknown value and a path another family has, naming the field', () => {
    expect(errorOf(yaml('  m: { provider: oai, structured_output: json }'))).toContain('models.m.structured_output');
    expect(errorOf(yaml('  m: { provider: oai, structured_output: forced_tool }'))).toMatch(/models\.m\.structured_output.*forced_tool is for the anthropic family, not openai/);
    expect(errorOf(yaml('  m: { providers: { gem: {}, claude: { structured_output: converted_schema } } }'))).toMatch(/models\.m\.providers\.claude\.structured_output.*gemini/);
    expect(targetsOf('  m: { provider: gem, structured_output: converted_schema }', 'm')).toEqual([['gem', 'converted_schema']]);
  });
});

describe('models.<id>.timeouts', () => {
  it('apply to every provider entry of the model; an entry sets its own where it gives them', () => {
    const cfg = loadGatewayConfig(
      `
providers:
  a: { family: mock }
  b: { family: mock }
models:
  one: { provider: a, timeouts: { connect_ms: 1500 } }
  m: { timeouts: { connect_ms: 1234, total_ms: 9000 }, providers: { a: {}, b: { timeouts: { connect_ms: 50, idle_ms: 9 } } } }
`,
      {},
    );
    expect(cfg.models.one.targets[0].timeouts).toEqual({ connect_ms: 1500 });
    expect(cfg.models.m.targets.map((t) => t.timeouts)).toEqual([
      { connect_ms: 1234, total_ms: 9000 },
      { connect_ms: 50, idle_ms: 9, total_ms: 9000 },
    ]);
  });
});
