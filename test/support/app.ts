import { Type } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { AppModule } from '../../src/app.module';
import { prepareApp } from '../../src/bootstrap';
import { GatewayExpressAdapter } from '../../src/common/http/express-messages';
import { createLogger } from '../../src/common/logging/logger';
import { AppConfig } from '../../src/config/app-config';
import { loadEnv } from '../../src/config/env';
import { loadGatewayConfig } from '../../src/config/gateway-config';
import { SqlStore } from '../../src/stores/sql/sql-store';
import { createTestPglite } from './pglite';

export const PRO_KEY = 'gw-test-pro-read-write';
export const READ_ONLY_KEY = 'gw-test-pro-read-only';
export const WRITE_ONLY_KEY = 'gw-test-pro-write-only';
export const FREE_KEY = 'gw-test-free';
export const NO_FEATURES_KEY = 'gw-test-pro-no-features';
export const KILLED_KEY = 'gw-test-pro-killed';

/** A gateway file with one org per guard case, used by the e2e suites unless they bring their own. */
export const TEST_GATEWAY_YAML = `
providers:
  mock: { family: mock }
models:
  mock-fast: { provider: mock, type: chat }
routes:
  - { name: default, models: [auto], targets: [mock/mock-fast] }
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys:
      - { id: acme-rw, key: "${PRO_KEY}", permissions: [read, write] }
      - { id: acme-ro, key: "${READ_ONLY_KEY}", permissions: [read] }
      - { id: acme-wo, key: "${WRITE_ONLY_KEY}", permissions: [write] }
  freeco:
    plan: free
    features: [has_test_ab, feedback_routing, explain]
    api_keys: [ { id: free-rw, key: "${FREE_KEY}" } ]
  bareco:
    plan: pro
    api_keys: [ { id: bare-rw, key: "${NO_FEATURES_KEY}" } ]
  killco:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    kill_switches: [experiments]
    api_keys: [ { id: killed-rw, key: "${KILLED_KEY}" } ]
`;

export interface TestAppOptions {
  yaml?: string;
  /** Extra environment (DATABASE_URL, REDIS_URL, ...). Without DATABASE_URL a migrated in-memory PGlite is used. */
  env?: Record<string, string>;
  /** Test-only controllers mounted beside the real ones (probe routes for cross-cutting pieces). */
  controllers?: Type<unknown>[];
  /** Feature modules to import beside AppModule (for a module not yet wired into AppModule). */
  modules?: Type<unknown>[];
  /** Providers replaced by a value (e.g. the circuit breakers' tuning). */
  overrides?: Array<{ provide: unknown; useValue: unknown }>;
}

export interface TestApp {
  app: NestExpressApplication;
  config: AppConfig;
  /** Base URL while listening on an ephemeral loopback port. */
  url: string;
  /** Every log line written, parsed (to assert what is and is not logged). */
  logs: string[];
  demoKey?: string;
  close(): Promise<void>;
}

/** The real AppModule, listening on 127.0.0.1:0, with the given config and stores. */
export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gw-e2e-'));
  const rawEnv = { GATEWAY_DATA_DIR: dataDir, ...(opts.env ?? {}) };
  const config = new AppConfig(loadEnv(rawEnv), loadGatewayConfig(opts.yaml ?? TEST_GATEWAY_YAML, rawEnv));
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  const logger = { pino: createLogger('info', sink) };
  let builder = Test.createTestingModule({ imports: [AppModule.forRoot(config, logger), ...(opts.modules ?? [])], controllers: opts.controllers ?? [] });
  if (!config.env.databaseUrl) builder = builder.overrideProvider(SqlStore).useValue(await createTestPglite());
  for (const o of opts.overrides ?? []) builder = builder.overrideProvider(o.provide).useValue(o.useValue);
  const moduleRef = await builder.compile();
  const app = moduleRef.createNestApplication<NestExpressApplication>(new GatewayExpressAdapter(), { bodyParser: false, logger: false });
  const { demoKey } = await prepareApp(app, config);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return {
    app,
    config,
    url,
    logs,
    demoKey,
    async close() {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
