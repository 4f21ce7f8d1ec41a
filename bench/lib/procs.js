'use strict';
/**
 * Child processes of the bench: the build, the fake upstream and the gateway, each started with the
 * file-descriptor soft limit raised as far as the hard limit allows (`bash -c 'ulimit -n …'`), and
 * their CPU time and RSS read from /proc.
 */
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..', '..');
const WANT_FDS = 65535;

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ). */
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** The soft and hard RLIMIT_NOFILE of a child shell (what the bench's children start with). */
function fdLimits() {
  const r = spawnSync('bash', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8' });
  const [soft, hard] = r.stdout.trim().split('\n').map((s) => (s === 'unlimited' ? Infinity : Number(s)));
  return { soft, hard };
}

/** The fd limit the children get: 65535 where the hard limit allows, else the hard limit. */
function childFdLimit() {
  const { hard } = fdLimits();
  return Math.min(WANT_FDS, hard);
}

/** Spawns `argv` through bash with `ulimit -n` raised; `exec` keeps the pid the program's own. */
function spawnWithFds(argv, opts) {
  const limit = childFdLimit();
  return spawn('bash', ['-c', `ulimit -n ${limit} 2>/dev/null; exec "$@"`, 'bench', ...argv], opts);
}

/** utime and stime of a process in seconds (all its threads: JS, GC helpers, libuv pool). */
function cpuTimes(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state); utime is field 14, stime field 15.
  return { user: Number(rest[11]) / CLK_TCK, sys: Number(rest[12]) / CLK_TCK };
}

/** utime+stime of a process in seconds. */
function cpuSeconds(pid) {
  const t = cpuTimes(pid);
  return t.user + t.sys;
}

/** Resident set size in MiB (VmRSS). */
function rssMiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

function openFds(pid) {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return NaN;
  }
}

/** bench/.build/run-<pid> folders of bench runs that were killed before they could clean up. */
function removeStaleBuilds() {
  const base = path.join(ROOT, 'bench', '.build');
  for (const name of fs.existsSync(base) ? fs.readdirSync(base) : []) {
    const pid = Number(/^run-(\d+)$/.exec(name)?.[1]);
    if (!pid || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      fs.rmSync(path.join(base, name), { recursive: true, force: true });
    }
  }
}

/**
 * Builds the gateway from the working tree with `nest build` into a private folder under
 * bench/.build (so a concurrent `nest build` of dist/ by the test suite cannot pull files from under
 * a running bench); the assets (migrations, Lua) are copied by nest as for dist/.
 */
function buildGateway(name) {
  removeStaleBuilds();
  const dir = path.join(ROOT, 'bench', '.build', name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const rel = (p) => path.relative(ROOT, p).split(path.sep).join('/');
  const up = path.relative(dir, ROOT).split(path.sep).join('/');
  const out = path.join(dir, 'dist');
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      extends: `${up}/tsconfig.json`,
      compilerOptions: { outDir: `${up}/${rel(out)}` },
      include: [`${up}/src/**/*.ts`],
      exclude: [`${up}/node_modules`, `${up}/dist`, `${up}/**/*.spec.ts`],
    }),
  );
  const cli = JSON.parse(fs.readFileSync(path.join(ROOT, 'nest-cli.json'), 'utf8'));
  cli.compilerOptions.assets = (cli.compilerOptions.assets ?? []).map((a) => (typeof a === 'string' ? a : { ...a, outDir: rel(out) }));
  fs.writeFileSync(path.join(dir, 'nest-cli.json'), JSON.stringify(cli));
  const nest = require.resolve('@nestjs/cli/bin/nest.js', { paths: [ROOT] });
  const started = Date.now();
  const r = spawnSync(process.execPath, [nest, 'build', '-c', rel(path.join(dir, 'nest-cli.json')), '-p', rel(path.join(dir, 'tsconfig.json'))], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (r.status !== 0 || !fs.existsSync(path.join(out, 'main.js'))) {
    throw new Error(`nest build failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return { dir, main: path.join(out, 'main.js'), ms: Date.now() - started, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Starts the fake upstream as its own process (so its work does not share the harness's event loop). */
function startFake(options) {
  const child = spawnWithFds([process.execPath, '-r', path.join(__dirname, 'orphan-guard.js'), path.join(__dirname, 'fake-upstream.js'), JSON.stringify(options)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (s) => {
      out += s;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      child.stdout.off('data', onData);
      const { port } = JSON.parse(out.slice(0, nl));
      resolve({
        child,
        pid: child.pid,
        port,
        url: `http://127.0.0.1:${port}`,
        stats: () =>
          new Promise((res) => {
            child.once('message', (m) => res(m.stats));
            child.send('stats');
          }),
        stop: () => stopChild(child),
      });
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.once('exit', (code) => reject(new Error(`fake upstream exited (${code}) before listening`)));
  });
}

function stopChild(child, signal = 'SIGTERM', ms = 15_000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    child.once('exit', () => (clearTimeout(t), resolve()));
    child.kill(signal);
  });
}

/**
 * Starts the built gateway (`node <main.js>`, what `npm start` runs) with the given environment;
 * its stdout/stderr (pino JSON lines at the shipped default level) go to a log file. Resolves once
 * GET /health answers 200.
 */
async function startGateway({ main, env, port, logFile, nodeArgs = [], timeoutMs = 60_000 }) {
  const fd = fs.openSync(logFile, 'a');
  const child = spawnWithFds([process.execPath, '-r', path.join(__dirname, 'orphan-guard.js'), ...nodeArgs, main], {
    cwd: ROOT,
    env,
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`gateway exited (${child.exitCode ?? child.signalCode}) before answering /health:\n${tail(logFile)}`);
    }
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gateway did not answer /health within ${timeoutMs} ms:\n${tail(logFile)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, pid: child.pid, url, logFile, stop: (signal) => stopChild(child, signal ?? 'SIGTERM', 30_000) };
}

function tail(file, bytes = 4000) {
  try {
    const s = fs.readFileSync(file, 'utf8');
    return s.slice(-bytes);
  } catch {
    return '';
  }
}

/**
 * What a harness started, undone newest first exactly once: when it ends (`run()`), or on SIGINT /
 * SIGTERM (then the process exits 130). A cleanup that throws is logged and the rest still run.
 */
function cleanupStack(log) {
  const stack = [];
  let running = null;
  const run = () =>
    (running ??= (async () => {
      for (const c of stack.splice(0).reverse()) {
        try {
          await c();
        } catch (err) {
          log(`cleanup: ${err.message}`);
        }
      }
    })());
  const onSignal = (sig) => {
    log(`${sig}: stopping`);
    run().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return { push: (c) => stack.push(c), run };
}

/** The environment of a gateway child: nothing of the harness's own but PATH and HOME, loopback, its port, config file and data dir. */
function gatewayEnv({ tmp, port, config, dataDir, extra = {} }) {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? tmp,
    HOST: '127.0.0.1',
    PORT: String(port),
    GATEWAY_CONFIG: config,
    GATEWAY_DATA_DIR: dataDir,
    ...extra,
  };
}

module.exports = { ROOT, CLK_TCK, fdLimits, childFdLimit, spawnWithFds, cpuTimes, cpuSeconds, rssMiB, openFds, buildGateway, startFake, startGateway, stopChild, tail, cleanupStack, gatewayEnv };
