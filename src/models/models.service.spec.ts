import { makeCaller, makeConfig, thrownBy } from '../../test/support/kit';
import { GatewayError } from '../common/errors/gateway-error';
import { ListedModel, ModelsService } from './models.service';

const YAML = `
providers:
  openai: { family: openai, api_key: sk-x }
  mock: { family: mock }
  mock2: { family: mock }
models:
  zeta: { provider: mock }
  both: { providers: { mock2: {}, mock: {} } }
  embed: { provider: mock, type: embedding }
  meta-llama/Llama-3-8B: { provider: openai }
  gpt-4o-mini: { provider: openai }
routes:
  - { name: everyone, orgs: ["*"], models: [auto, zeta], targets: [mock/zeta] }
  - { name: acme-only, orgs: [acme, beta], models: [acme-fast, "*"], targets: [mock/zeta] }
  - { name: gamma-only, orgs: [gamma], models: [gamma-smart, auto], targets: [both] }
  - { name: shadowed, orgs: [acme], models: [acme-fast, late], targets: [mock/zeta] }
`;

const service = (yaml = YAML) => new ModelsService(makeConfig(yaml));
const listOf = (orgId: string, yaml?: string): ListedModel[] => service(yaml).list(makeCaller({ orgId }));
const ids = (orgId: string, yaml?: string) => listOf(orgId, yaml).map((m) => m.id);

const notFound = (fn: () => unknown): GatewayError => thrownBy(fn, GatewayError);

describe('ModelsService.list', () => {
  it('lists every catalogue id, chat and embedding, with its (first) provider as owner', () => {
    const byId = Object.fromEntries(listOf('nobody').map((m) => [m.id, m.ownedBy]));
    expect(byId).toMatchObject({ zeta: 'mock', both: 'mock2', embed: 'mock', 'meta-llama/Llama-3-8B': 'openai', 'gpt-4o-mini': 'openai' });
  });

  it('adds the aliases of the routes whose orgs match the organisation, owned by the gateway', () => {
    expect(ids('acme')).toEqual(['acme-fast', 'auto', 'both', 'embed', 'gpt-4o-mini', 'late', 'meta-llama/Llama-3-8B', 'zeta']);
    expect(ids('gamma')).toEqual(['auto', 'both', 'embed', 'gamma-smart', 'gpt-4o-mini', 'meta-llama/Llama-3-8B', 'zeta']);
    expect(listOf('gamma').find((m) => m.id === 'gamma-smart')).toEqual({ id: 'gamma-smart', ownedBy: 'gateway' });
  });

  it('an organisation named by no route sees the catalogue and the wildcard-org aliases only', () => {
    expect(ids('nobody')).toEqual(['auto', 'both', 'embed', 'gpt-4o-mini', 'meta-llama/Llama-3-8B', 'zeta']);
  });

  it('never lists the route wildcard "*" as a name', () => {
    expect(ids('beta')).toEqual(['acme-fast', 'auto', 'both', 'embed', 'gpt-4o-mini', 'meta-llama/Llama-3-8B', 'zeta']);
    expect(ids('beta')).not.toContain('*');
  });

  it('lists an alias equal to a catalogue id once, as the catalogue model; an alias in several routes once', () => {
    const acme = listOf('acme');
    expect(acme.filter((m) => m.id === 'zeta')).toEqual([{ id: 'zeta', ownedBy: 'mock' }]);
    expect(acme.filter((m) => m.id === 'acme-fast')).toEqual([{ id: 'acme-fast', ownedBy: 'gateway' }]);
    expect(listOf('gamma').filter((m) => m.id === 'auto')).toHaveLength(1);
  });

  it('sorts by id in code-unit order, whatever the order of the file', () => {
    const yaml = `
providers: { mock: { family: mock } }
models:
  b: { provider: mock }
  Z: { provider: mock }
  "10": { provider: mock }
  a: { provider: mock }
routes:
  - { name: r, orgs: ["*"], models: [c, A], targets: [a] }
`;
    expect(ids('acme', yaml)).toEqual(['10', 'A', 'Z', 'a', 'b', 'c']);
  });

  it('lists names that are Object.prototype members like any other name', () => {
    const yaml = `
providers: { mock: { family: mock } }
models:
  constructor: { provider: mock }
routes:
  - { name: r, orgs: ["*"], models: [__proto__, toString], targets: [mock/constructor] }
`;
    expect(listOf('acme', yaml)).toEqual([
      { id: '__proto__', ownedBy: 'gateway' },
      { id: 'constructor', ownedBy: 'mock' },
      { id: 'toString', ownedBy: 'gateway' },
    ]);
  });

  it('an empty catalogue and no routes is an empty list', () => {
    expect(listOf('acme', 'providers: { mock: { family: mock } }\n')).toEqual([]);
  });
});

describe('ModelsService.find', () => {
  const acme = makeCaller({ orgId: 'acme' });
  const gamma = makeCaller({ orgId: 'gamma' });

  it('finds catalogue ids (a slash in the id included) and the caller\'s aliases', () => {
    const s = service();
    expect(s.find(acme, 'both')).toEqual({ id: 'both', ownedBy: 'mock2' });
    expect(s.find(acme, 'embed')).toEqual({ id: 'embed', ownedBy: 'mock' });
    expect(s.find(acme, 'meta-llama/Llama-3-8B')).toEqual({ id: 'meta-llama/Llama-3-8B', ownedBy: 'openai' });
    expect(s.find(acme, 'acme-fast')).toEqual({ id: 'acme-fast', ownedBy: 'gateway' });
    expect(s.find(gamma, 'gamma-smart')).toEqual({ id: 'gamma-smart', ownedBy: 'gateway' });
  });

  it('finds a provider/model pair the catalogue serves, owned by that provider', () => {
    const s = service();
    expect(s.find(acme, 'mock/both')).toEqual({ id: 'mock/both', ownedBy: 'mock' });
    expect(s.find(acme, 'openai/gpt-4o-mini')).toEqual({ id: 'openai/gpt-4o-mini', ownedBy: 'openai' });
  });

  it('404 model_not_found naming the id: another organisation\'s alias, "*", a name only a wildcard route takes, a pair the provider does not serve', () => {
    const s = service();
    const cases: Array<[ReturnType<typeof makeCaller>, string]> = [
      [gamma, 'acme-fast'],
      [acme, 'gamma-smart'],
      [acme, '*'],
      [acme, 'anything-else'],
      [acme, 'openai/zeta'],
      [acme, 'nobody/zeta'],
      [acme, 'zeta,both'],
      [acme, ''],
    ];
    for (const [caller, id] of cases) {
      const err = notFound(() => s.find(caller, id));
      expect([id, err.code, err.status, err.message]).toEqual([id, 'model_not_found', 404, `The model "${id}" does not exist or no route serves it.`]);
    }
  });

  it('Object.prototype names are unknown models, not crashes', () => {
    const s = service();
    for (const id of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'mock/__proto__', '__proto__/zeta', 'mock/constructor']) {
      expect([id, notFound(() => s.find(acme, id)).code]).toEqual([id, 'model_not_found']);
    }
  });
});

describe('ModelsService with a models allow-list (README "Limits")', () => {
  const s = service();
  const listed = makeCaller({ orgId: 'acme', limits: { key: { models: ['zeta', 'auto', 'mock2/both', 'acme-fast'] }, org: { models: ['zeta', 'auto', 'both', 'embed'] } } });

  it('lists only the names both the key\'s and the organisation\'s lists allow', () => {
    expect(s.list(listed).map((m) => m.id)).toEqual(['auto', 'zeta']);
    expect(s.list(makeCaller({ orgId: 'acme', limits: { org: { models: ['embed', 'acme-fast'] } } })).map((m) => m.id)).toEqual(['acme-fast', 'embed']);
  });

  it('finds an allowed name or pair; any other name is the 404 of an unknown one', () => {
    expect(s.find(listed, 'zeta')).toEqual({ id: 'zeta', ownedBy: 'mock' });
    expect(s.find(listed, 'mock2/both')).toEqual({ id: 'mock2/both', ownedBy: 'mock2' });
    for (const id of ['both', 'mock/both', 'embed', 'acme-fast', 'gpt-4o-mini']) {
      const err = notFound(() => s.find(listed, id));
      expect([id, err.code, err.message]).toEqual([id, 'model_not_found', `The model "${id}" does not exist or no route serves it.`]);
    }
  });
});
