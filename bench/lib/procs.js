'use strict';
/**
 * Child processes of the bench: the build, the fake upstream and the gateway, each started with the
 * file-descriptor soft limit raised as far as the hard limit allows (`bash -c 'ulimit -n …'`), and
 * their CPU time and RSS read from /proc.
 */
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { StringDecoder } = require('node:string_decoder');

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

/**
 * CPU seconds of a process split by thread: `main` (the JS thread, tid = pid) and `others` (V8's
 * GC and compiler helpers, the libuv pool, worker threads such as the embedded store's), with the
 * busiest other thread apart, so a profile's "where" can be read against its "how much".
 */
function threadCpuTimes(pid) {
  const out = { main: 0, others: 0, threads: {} };
  let tids = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const seconds = (Number(rest[11]) + Number(rest[12])) / CLK_TCK;
    out.threads[tid] = seconds;
    if (Number(tid) === pid) out.main = seconds;
    else out.others += seconds;
  }
  return out;
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
    const pid = Number(/^(?:run|ab)-(\d+)(?:-|$)/.exec(name)?.[1]);
    if (!pid || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      fs.rmSync(path.join(base, name), { recursive: true, force: true });
    }
  }
}

/** What a build reads (`buildGateway`, `extractCommit`): without `.swcrc` the compiler falls back to Nest's defaults (another target, no source maps), and a commit built so is not the code the working tree makes of the same sources. */
const BUILD_FILES = ['src', 'tsconfig.json', 'nest-cli.json', '.swcrc'];

/**
 * Builds the gateway from the working tree with `nest build` into a private folder under
 * bench/.build (so a concurrent `nest build` of dist/ by the test suite cannot pull files from under
 * a running bench); the assets (migrations, Lua) are copied by nest as for dist/. `tree` builds
 * another copy of the sources instead (a folder with its own src/, tsconfig.json and nest-cli.json,
 * e.g. a commit extracted by `extractCommit`), into the same kind of private folder.
 */
function buildGateway(name, { tree } = {}) {
  removeStaleBuilds();
  const root = tree ?? ROOT;
  const missing = BUILD_FILES.filter((f) => !fs.existsSync(path.join(root, f)));
  if (missing.length > 0) throw new Error(`cannot build ${root}: it lacks ${missing.join(', ')} (a build without them is not the gateway's)`);
  const dir = path.join(ROOT, 'bench', '.build', name);
  fs.rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const rel = (p) => path.relative(root, p).split(path.sep).join('/');
  const up = path.relative(dir, root).split(path.sep).join('/') || '.';
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
  const cli = JSON.parse(fs.readFileSync(path.join(root, 'nest-cli.json'), 'utf8'));
  cli.compilerOptions.assets = (cli.compilerOptions.assets ?? []).map((a) => (typeof a === 'string' ? a : { ...a, outDir: rel(out) }));
  fs.writeFileSync(path.join(dir, 'nest-cli.json'), JSON.stringify(cli));
  const nest = require.resolve('@nestjs/cli/bin/nest.js', { paths: [ROOT] });
  const started = Date.now();
  const r = spawnSync(process.execPath, [nest, 'build', '-c', rel(path.join(dir, 'nest-cli.json')), '-p', rel(path.join(dir, 'tsconfig.json'))], {
    cwd: root,
    encoding: 'utf8',
  });
  if (r.status !== 0 || !fs.existsSync(path.join(out, 'main.js'))) {
    throw new Error(`nest build failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return { dir, main: path.join(out, 'main.js'), ms: Date.now() - started, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The gateway's sources at a commit (`git archive` of BUILD_FILES), extracted under
 * bench/.build/<name>/tree, so `buildGateway(…, { tree })` builds them; the repository and its
 * working tree are only read. Under bench/, so the build resolves the same node_modules.
 */
function extractCommit(rev, name) {
  const tree = path.join(ROOT, 'bench', '.build', name, 'tree');
  fs.rmSync(tree, { recursive: true, force: true });
  fs.mkdirSync(tree, { recursive: true });
  const archive = spawnSync('git', ['archive', '--format=tar', rev, ...BUILD_FILES], { cwd: ROOT, maxBuffer: 1 << 30 });
  if (archive.status !== 0) throw new Error(`git archive ${rev} failed: ${archive.stderr}`);
  const untar = spawnSync('tar', ['-x', '-C', tree], { input: archive.stdout });
  if (untar.status !== 0) throw new Error(`extracting ${rev} failed: ${untar.stderr}`);
  const commit = spawnSync('git', ['rev-parse', '--short', rev], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  return { tree, commit };
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

/**
 * Starts a reference proxy of `npm run bench:floor` (lib/floor-proxy.js, kind `node`, `express` or `nest`)
 * in front of the fake upstream; it exits when the harness's end of its stdin closes.
 */
function startFloorProxy(kind, upstreamPort) {
  const child = spawnWithFds([process.execPath, '-r', path.join(__dirname, 'orphan-guard.js'), path.join(__dirname, 'floor-proxy.js'), kind, String(upstreamPort)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8').once('data', (s) =>
      resolve({ child, pid: child.pid, url: `http://127.0.0.1:${JSON.parse(s).port}`, stop: () => stopChild(child) }),
    );
    child.once('exit', (code) => reject(new Error(`${kind} floor proxy exited (${code}) before listening`)));
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
 * The variables `npm start` sets before `node` (package.json's start script, `NAME=value … node …`):
 * every harness starts the gateway as that command does, so what it measures is what users run.
 */
function startCommandEnv() {
  const script = require(path.join(ROOT, 'package.json')).scripts.start;
  const out = {};
  for (const word of script.split(/\s+/)) {
    const m = /^([A-Z_][A-Z0-9_]*)=(\S*)$/.exec(word);
    if (!m) break;
    out[m[1]] = m[2];
  }
  return out;
}

/**
 * `env` with `overrides` applied: `NAME=value` words; an empty value removes the variable (to
 * measure without one of the start command's).
 */
function withEnvOverrides(env, overrides = []) {
  const out = { ...env };
  for (const o of overrides) {
    const i = o.indexOf('=');
    if (i <= 0) throw new Error(`not NAME=value: ${o}`);
    const [k, v] = [o.slice(0, i), o.slice(i + 1)];
    if (v === '') delete out[k];
    else out[k] = v;
  }
  return out;
}

/**
 * Starts the built gateway (`node <main.js>` with the variables of `npm start`) with the given environment;
 * its stdout/stderr (pino JSON lines at the shipped default level) go to a log file. Resolves once
 * GET /health answers 200.
 */
async function startGateway({ main, env, port, logFile, nodeArgs = [], envOverrides = [], timeoutMs = 60_000 }) {
  const fd = fs.openSync(logFile, 'a');
  const child = spawnWithFds([process.execPath, '-r', path.join(__dirname, 'orphan-guard.js'), ...nodeArgs, main], {
    cwd: ROOT,
    env: withEnvOverrides({ ...startCommandEnv(), ...env }, envOverrides),
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

/** The last `bytes` of a file ('' when it cannot be read), without reading the rest: a gateway's log can be hundreds of MiB. */
function tail(file, bytes = 4000) {
  let fd;
  try {
    fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.allocUnsafe(Math.min(bytes, size));
    const n = fs.readSync(fd, buf, 0, buf.length, size - buf.length);
    return buf.subarray(0, n).toString('utf8');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * Calls `fn` with each line of a file, reading it 16 MiB at a time (a full run's gateway log, one
 * line per request, outgrows the longest string V8 makes, ≈ 512 MiB); returns the bytes read.
 */
function eachLine(file, fn) {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.allocUnsafe(16 * 1024 * 1024);
  let bytes = 0;
  try {
    let rest = '';
    // A character split across two reads is kept for the next one.
    const decoder = new StringDecoder('utf8');
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      bytes += n;
      const parts = (rest + decoder.write(buf.subarray(0, n))).split('\n');
      rest = parts.pop();
      for (const l of parts) fn(l);
    }
    fn(rest + decoder.end());
  } finally {
    fs.closeSync(fd);
  }
  return bytes;
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

module.exports = { ROOT, CLK_TCK, fdLimits, childFdLimit, spawnWithFds, cpuTimes, threadCpuTimes, cpuSeconds, rssMiB, openFds, buildGateway, extractCommit, startFake, startFloorProxy, startGateway, stopChild, tail, eachLine, cleanupStack, gatewayEnv };
