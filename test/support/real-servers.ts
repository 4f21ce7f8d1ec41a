/**
 * Real-server suites: `describeWithPostgres` / `describeWithRedis` run when scripts/test.js (or the
 * caller) provided TEST_DATABASE_URL / TEST_REDIS_URL. Otherwise they are skipped, and the test
 * command has already printed the loud line naming them (REQUIRE_REAL_SERVERS=1 makes that a failure).
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL;

export const describeWithPostgres: jest.Describe = TEST_DATABASE_URL ? describe : describe.skip;
export const describeWithRedis: jest.Describe = TEST_REDIS_URL ? describe : describe.skip;
