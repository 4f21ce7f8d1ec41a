'use strict';
/**
 * Throwaway Postgres 15 and Redis servers on loopback for the real-server test suites.
 * Used by scripts/test.js when TEST_DATABASE_URL / TEST_REDIS_URL are not set, and by the bench.
 * Each server lives in a fresh temp dir and is stopped (and the dir removed) by stop().
 */
const { execFile, execFileSync, spawnSync } = require('node:child_process');
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

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
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

function pgRunAsync(bin, args) {
  const exe = path.join(PG_BIN, bin);
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', exe, ...args]] : [exe, args];
  return new Promise((resolve, reject) =>
    execFile(file, argv, { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${bin} ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve(stdout))),
  );
}

/**
 * `durableCommits`: keep synchronous_commit on. The test default turns it off for speed, which is
 * safe while the server is only ever stopped at the end; a server stopped with `-m immediate`
 * mid-run (the chaos soak) would then lose commits it had already acknowledged.
 */
/*
 * PG_EXTRA_OPTS: more `-c name=value` settings for the server, to look into a test or a benchmark
 * (for example `-c log_min_duration_statement=20`; the log is `log` in the server's temp dir).
 */
async function startPostgres({ durableCommits = false } = {}) {
  if (!fs.existsSync(path.join(PG_BIN, 'initdb'))) return { skipped: `no Postgres binaries in ${PG_BIN}` };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-pg-'));
  const data = path.join(dir, 'data');
  fs.mkdirSync(data);
  if (isRoot) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  const port = await freePort();
  pgRun('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const opts = `-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${dir} -c fsync=off${durableCommits ? '' : ' -c synchronous_commit=off'} -c full_page_writes=off -c max_connections=200${process.env.PG_EXTRA_OPTS ? ` ${process.env.PG_EXTRA_OPTS}` : ''}`;
  // The chaos soak stops and starts the same server in place (same port, same data dir), so its
  // clients see an outage of one Postgres rather than a different one.
  // up/down resolve when pg_ctl is done and never block the caller's event loop (the soak keeps
  // driving traffic meanwhile).
  const up = () => pgRunAsync('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', 'start']);
  const down = (mode = 'immediate') => pgRunAsync('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
  pgRun('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', 'start']);
  pgRun('createdb', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', 'test']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    port,
    dir,
    data,
    log: path.join(dir, 'log'),
    /** The postmaster's pid (first line of postmaster.pid), or null while it is not running. */
    pid() {
      try {
        return Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
      } catch {
        return null;
      }
    },
    /** Stops the server (`pg_ctl stop -m <mode>`, default immediate: no checkpoint, clients cut off) and keeps its data; a promise. */
    down,
    /** Starts it again on the same port and data dir; resolves once it accepts connections. */
    up,
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
  const readPid = () => {
    try {
      return Number(fs.readFileSync(pidfile, 'utf8').trim()) || null;
    } catch {
      return null;
    }
  };
  // A killed daemon may linger as a zombie until something reaps it: that is not a running server.
  const alive = (pid) => {
    try {
      process.kill(pid, 0);
    } catch {
      return false;
    }
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return true;
    }
  };
  const launch = async () => {
    // A server killed with SIGKILL leaves its pid file behind: the new one must not be taken for it.
    fs.rmSync(pidfile, { force: true });
    await new Promise((resolve, reject) =>
      execFile(bin, ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--save', '', '--appendonly', 'no',
        '--pidfile', pidfile, '--dir', dir, '--logfile', path.join(dir, 'log')], { timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
    );
    // Bounded waits (10 s each) for the daemon's pid file, then for its port: on a loaded machine
    // the forked server can take a while, and callers use both at once.
    for (let i = 0; i < 500 && !readPid(); i++) await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 100 && !(await canConnect(port)); i++) await new Promise((r) => setTimeout(r, 100));
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    /** The server's pid (from its pid file), or null when it is not running. */
    pid() {
      const pid = readPid();
      return pid && alive(pid) ? pid : null;
    },
    /**
     * Starts the server again on the same port and dir (the chaos soak kills it with SIGKILL and
     * brings it back as an orchestrator would); a server still running is stopped first.
     */
    async restart() {
      const pid = readPid();
      if (pid && alive(pid)) {
        try {
          process.kill(pid, 'SIGCONT');
          process.kill(pid, 'SIGKILL');
        } catch {}
        for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20));
      }
      await launch();
    },
    stop() {
      try {
        const pid = readPid();
        // A frozen (SIGSTOPped) server would never act on SIGTERM.
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGTERM');
        // Wait (bounded) for it to exit: it may still be writing its log while the dir is removed.
        for (let i = 0; i < 100; i++) {
          if (!alive(pid)) break;
          spawnSync('sleep', ['0.02']);
        }
      } catch {}
      removeDir(dir);
    },
  };
}

module.exports = { startPostgres, startRedis, freePort };
