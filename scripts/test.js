#!/usr/bin/env node
'use strict';
/**
 * `npm test`: the whole suite. Real-server suites take Postgres and Redis from TEST_DATABASE_URL
 * and TEST_REDIS_URL; when those are unset, throwaway servers are started on loopback here. When a
 * server can be neither had nor started, its suites are skipped with one loud line; with
 * REQUIRE_REAL_SERVERS=1 (as .ci/run sets) that is a failure instead.
 */
const { spawnSync } = require('node:child_process');
const { startPostgres, startRedis } = require('./test-servers');

async function main() {
  const started = [];
  const skipped = [];
  const env = { ...process.env };
  for (const [name, envVar, start] of [
    ['Postgres', 'TEST_DATABASE_URL', startPostgres],
    ['Redis', 'TEST_REDIS_URL', startRedis],
  ]) {
    if (env[envVar]) continue;
    try {
      const s = await start();
      if (s.skipped) skipped.push(`${name} (${s.skipped})`);
      else {
        started.push(s);
        env[envVar] = s.url;
      }
    } catch (err) {
      skipped.push(`${name} (could not start: ${String(err.message).split('\n')[0]})`);
    }
  }
  const stopAll = () => started.splice(0).forEach((s) => s.stop());
  process.on('SIGINT', () => (stopAll(), process.exit(130)));
  process.on('SIGTERM', () => (stopAll(), process.exit(143)));

  if (skipped.length) {
    const line = `!!! REAL-SERVER SUITES SKIPPED: ${skipped.join('; ')} — set TEST_DATABASE_URL / TEST_REDIS_URL or install the servers !!!`;
    console.error(line);
    if (process.env.REQUIRE_REAL_SERVERS === '1') {
      stopAll();
      console.error('REQUIRE_REAL_SERVERS=1: failing because real-server suites would be skipped');
      process.exit(1);
    }
  }
  const jest = require.resolve('jest/bin/jest');
  const r = spawnSync(process.execPath, [jest, ...process.argv.slice(2)], { stdio: 'inherit', env });
  stopAll();
  if (skipped.length) console.error(`!!! REAL-SERVER SUITES SKIPPED: ${skipped.join('; ')} !!!`);
  process.exit(r.status ?? 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
