'use strict';
/**
 * Throwaway Postgres 15 and Redis servers on loopback for the real-server test suites.
 * Used by scripts/test.js when TEST_DATABASE_URL / TEST_REDIS_URL are not set, and by the bench.
 * Each server lives in a fresh temp dir and is stopped (and the dir removed) by stop().
 */
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const PG_BIN = process.env.PG_BIN || '/usr/lib/postgresql/15/bin';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function which(bin) {
  const r = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Runs a Postgres binary, as the `postgres` user when we are root (initdb refuses root). */
function pgRun(bin, args) {
  const exe = path.join(PG_BIN, bin);
  if (isRoot) return execFileSync('runuser', ['-u', 'postgres', '--', exe, ...args], { stdio: 'pipe' });
  return execFileSync(exe, args, { stdio: 'pipe' });
}

async function startPostgres() {
  if (!fs.existsSync(path.join(PG_BIN, 'initdb'))) return { skipped: `no Postgres binaries in ${PG_BIN}` };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-pg-'));
  const data = path.join(dir, 'data');
  fs.mkdirSync(data);
  if (isRoot) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  const port = await freePort();
  pgRun('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const opts = `-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
  pgRun('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', 'start']);
  pgRun('createdb', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', 'test']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    stop() {
      try {
        pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {}
      removeDir(dir);
    },
  };
}

/** Best effort: a server's leftovers in the temp dir must never fail the test run. */
function removeDir(dir) {
  try {
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch {}
}

async function startRedis() {
  const bin = which('redis-server');
  if (!bin) return { skipped: 'redis-server is not installed' };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-redis-'));
  const port = await freePort();
  const pidfile = path.join(dir, 'redis.pid');
  execFileSync(bin, ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--save', '', '--appendonly', 'no',
    '--pidfile', pidfile, '--dir', dir, '--logfile', path.join(dir, 'log')]);
  for (let i = 0; i < 100 && !fs.existsSync(pidfile); i++) await new Promise((r) => setTimeout(r, 20));
  return {
    url: `redis://127.0.0.1:${port}`,
    stop() {
      try {
        const pid = Number(fs.readFileSync(pidfile, 'utf8').trim());
        process.kill(pid, 'SIGTERM');
        // Wait (bounded) for it to exit: it may still be writing its log while the dir is removed.
        for (let i = 0; i < 100; i++) {
          try {
            process.kill(pid, 0);
          } catch {
            break;
          }
          spawnSync('sleep', ['0.02']);
        }
      } catch {}
      removeDir(dir);
    },
  };
}

module.exports = { startPostgres, startRedis, freePort };
