import type { Caller } from '../../../src/common/http/request-context';
import { AppConfig } from '../../../src/config/app-config';
import { loadEnv } from '../../../src/config/env';
import { loadGatewayConfig } from '../../../src/config/gateway-config';

/** The configuration a service is given: the gateway file `yaml` (empty = every default) and the environment `env`. */
export function makeConfig(yaml = '', env: Record<string, string> = {}): AppConfig {
  return new AppConfig(loadEnv(env), loadGatewayConfig(yaml, env));
}

/** An authenticated caller of organisation `acme` with read and write (factory with overrides). */
export function makeCaller(overrides: Partial<Caller> = {}): Caller {
  return {
    orgId: 'acme',
    keyId: 'acme-rw',
    plan: 'pro',
    features: ['feedback_routing', 'explain'],
    permissions: ['read', 'write'],
    killSwitches: [],
    monthlyRequestLimit: null,
    ...overrides,
  };
}
