/**
 * Shared pieces of the Admin API suites (docs/api.md "Admin API"): a gateway file with two
 * organisations that each have an admin key and a plain read/write key, a supertest caller, and the
 * store environments every suite runs on (PGlite and in-process cache; real Postgres and Redis when
 * TEST_DATABASE_URL and TEST_REDIS_URL are set).
 */
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { createTestDatabase, TestDatabase } from './postgres';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './real-servers';
import type { TestApp } from './app';

export const ADMIN_KEY = 'gw-test-acme-admin';
export const RW_KEY = 'gw-test-acme-rw';
export const OTHER_ADMIN_KEY = 'gw-test-other-admin';
export const OTHER_RW_KEY = 'gw-test-other-rw';

/** `more`: extra catalogue models and routes (YAML lines, indented like the others). */
export function adminYaml(extra = '', more: { models?: string; routes?: string } = {}): string {
  return `
providers:
  mock: { family: mock }
  alt: { family: mock }
models:
  mock-fast: { provider: mock, type: chat, cost: { input_per_mtok: 0.1, output_per_mtok: 0.4 }, quality: 0.7 }
  mock-smart: { provider: mock, type: chat, cost: { input_per_mtok: 1, output_per_mtok: 4 }, quality: 0.85 }
  shared: { type: chat, providers: { mock: {}, alt: {} } }
  embed: { provider: mock, type: embedding, dimensions: 8 }
${more.models ?? ''}
routes:
  - { name: default, models: [auto], strategy: ordered, targets: [mock/mock-fast, mock/mock-smart] }
  - { name: learned, models: [smart], strategy: feedback_driven, targets: [mock/mock-fast, mock/mock-smart] }
${more.routes ?? ''}
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys:
      - { id: acme-admin, key: "${ADMIN_KEY}", permissions: [read, write, admin] }
      - { id: acme-rw, key: "${RW_KEY}", permissions: [read, write] }
  other:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys:
      - { id: other-admin, key: "${OTHER_ADMIN_KEY}", permissions: [admin] }
      - { id: other-rw, key: "${OTHER_RW_KEY}", permissions: [read, write] }
${extra}`;
}

/** A caller on a running app: `http(t).get(path).set(auth(key))`. */
export const http = (t: TestApp) => request(t.app.getHttpServer());
export const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** The stores a suite runs on: a name and, per run, the environment and its clean-up. */
export interface StoreEnv {
  name: string;
  available: boolean;
  setUp(): Promise<{ env: Record<string, string>; tearDown(): Promise<void> }>;
}

export const STORE_ENVS: StoreEnv[] = [
  { name: 'PGlite and in-process cache', available: true, setUp: async () => ({ env: {}, tearDown: async () => undefined }) },
  {
    name: 'Postgres and Redis',
    available: Boolean(TEST_DATABASE_URL && TEST_REDIS_URL),
    setUp: async () => {
      const db: TestDatabase = await createTestDatabase();
      // A pepper of its own: Redis is shared by every suite, and the key caches are keyed by hash.
      const pepper = `admin-test-${randomBytes(8).toString('hex')}`;
      return { env: { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL!, GATEWAY_KEY_PEPPER: pepper }, tearDown: () => db.drop() };
    },
  },
];

/** `describe` per store environment; one that is not available is skipped (scripts/test.js names it). */
export function describeEachStore(title: string, body: (env: () => Record<string, string>, store: StoreEnv) => void): void {
  for (const store of STORE_ENVS) {
    (store.available ? describe : describe.skip)(`${title} (${store.name})`, () => {
      let current: { env: Record<string, string>; tearDown(): Promise<void> };
      beforeAll(async () => {
        current = await store.setUp();
      });
      afterAll(async () => {
        await current?.tearDown();
      });
      body(() => current.env, store);
    });
  }
}
