#!/usr/bin/env node
'use strict';
/**
 * `npm run bench [-- options]`: what the gateway costs. Builds the gateway from the working
 * tree, starts a zero-latency fake upstream and the gateway on loopback, drives load, and writes
 * bench/results/latest.json plus a Markdown table on stdout.
 *
 * Options:
 *   --quick            short runs and small stream counts (the smoke test)
 *   --servers          the gateway on throwaway Postgres 15 + Redis (scripts/test-servers.js)
 *                      instead of the embedded default (PGlite + in-process cache)
 *   --soak             add the 5-minute mixed soak (RSS before/after); --soak-seconds=N to change
 *   --settle-seconds=N memory: how long the streams of one level may take to open (default 60)
 *   --idle-seconds=N   memory: how long the gateway rests after the warm-up before its idle RSS is read (default 120)
 *   --only=a,b         sections: chat, responses, stream, memory, soak (soak needs --soak or --only=soak)
 *   --runs=N           runs per figure (default 3; each figure is the median, with min and max)
 *   --seconds=N        seconds per non-streaming run (default 8; quick 0.25)
 *   --connections=1,32 non-streaming concurrency levels (default 1,32,128)
 *   --out=FILE         where to write the JSON (default bench/results/latest.json)
 *   --node-options="--flag …"  extra Node/V8 flags for the gateway process (experiments, e.g. GC sizing)
 *   --cpu-prof=DIR     run the gateway under `node --cpu-prof --cpu-prof-dir=DIR`; the profile is
 *                      written when the gateway is stopped (SIGTERM) at the end, with a summary of
 *                      the gateway's chat runs next to it (bench/profile-summary.js). E.g.
 *                      --only=chat --connections=32 --runs=1 --seconds=15 --cpu-prof=/tmp/prof
 *   --keep-build       keep bench/.build/<run>/ (the gateway built for this run)
 *   --floor            the chat section also runs the Express reference proxy of `npm run bench:floor`
 *                      (lib/floor-proxy.js) in its alternation, with the same body: the gateway's CPU
 *                      per request over the floor's, paired by run (the budget's "× the Express floor");
 *                      the stream section likewise, with the floor's own added TTFB and gap p99
 *   --otel             add the otel section: what OpenTelemetry tracing costs. A second gateway with
 *                      tracing on exports to a local OTLP sink (lib/otlp-sink.js); non-streaming chat
 *                      runs alternate between the gateway with tracing off and the one with it on, CPU
 *                      per request paired by run (goal: under 10 % more). E.g. --only=chat --otel
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const procs = require('./lib/procs');
const { runLoad, warmUpTwice, warmUpSecondRound } = require('./lib/load');
const { runStreams, chunkTimings, openSlowStreams } = require('./lib/streams');
const { percentiles, summary, summarise, round } = require('./lib/stats');
const { renderMarkdown, evaluateBudget } = require('./lib/report');
const { startOtlpSink } = require('./lib/otlp-sink');
const { KEY, chatBody, responsesBody, gatewayYaml } = require('./lib/workload');

const SECTIONS = ['chat', 'responses', 'otel', 'stream', 'memory', 'soak'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (msg) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

function parseArgs(argv) {
  const a = { quick: false, servers: false, soak: false, otel: false, floor: false, keepBuild: false, only: null, out: null, runs: null, seconds: null, soakSeconds: null, cpuProf: null, connections: null, settleSeconds: null, idleSeconds: null, nodeOptions: null };
  for (const arg of argv) {
    const [k, v] = arg.split(/=(.*)/s, 2);
    switch (k) {
      case '--quick': a.quick = true; break;
      case '--servers': a.servers = true; break;
      case '--soak': a.soak = true; break;
      case '--otel': a.otel = true; break;
      case '--floor': a.floor = true; break;
      case '--keep-build': a.keepBuild = true; break;
      case '--only': a.only = v.split(',').map((s) => s.trim()).filter(Boolean); break;
      case '--out': a.out = path.resolve(v); break;
      case '--runs': a.runs = Number(v); break;
      case '--seconds': a.seconds = Number(v); break;
      case '--connections': a.connections = v.split(',').map(Number); break;
      case '--soak-seconds': a.soakSeconds = Number(v); break;
      case '--settle-seconds': a.settleSeconds = Number(v); break;
      case '--idle-seconds': a.idleSeconds = Number(v); break;
      case '--cpu-prof': a.cpuProf = path.resolve(v); break;
      case '--node-options': a.nodeOptions = v.split(/\s+/).filter(Boolean); break;
      case '--help': case '-h':
        process.stdout.write(fs.readFileSync(__filename, 'utf8').split('*/')[0].replace(/^#!.*\n'use strict';\n\/\*\*\n/, '').replace(/^ \* ?/gm, '') + '\n');
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${arg} (see --help)`);
    }
  }
  for (const s of a.only ?? []) if (!SECTIONS.includes(s)) throw new Error(`--only: unknown section "${s}" (${SECTIONS.join(', ')})`);
  return a;
}

function plan(a) {
  const q = a.quick;
  return {
    runs: a.runs ?? 3,
    warmupSeconds: q ? 0.3 : 3,
    // A gateway's JSON warm-up is longer: its JavaScript and the embedded store's WebAssembly are
    // still being compiled for a while after start, which the first measured runs would pay for
    // (the OpenTelemetry section's second gateway, warmed 3 s, read 1.30× the CPU of the first).
    gatewayWarmupSeconds: q ? 0.3 : 15,
    // Then a pause and a second round (lib/load.js warmUpTwice says why).
    warmupPauseMs: q ? 0 : 20_000,
    gatewayRewarmSeconds: q ? 0.3 : 10,
    chat: { connections: a.connections ?? [1, 32, 128], seconds: a.seconds ?? (q ? 0.25 : 8) },
    otel: { connections: a.connections ?? [1, 32], seconds: a.seconds ?? (q ? 0.25 : 8) },
    stream: { concurrency: [1, 32], seconds: q ? 0.4 : 5, chunks: 20, delayMs: 10 },
    memory: { counts: q ? [50, 200] : [1000, 10000], idleMs: (a.idleSeconds ?? (q ? 2 : 120)) * 1000, settleMs: (a.settleSeconds ?? (q ? 5 : 60)) * 1000, stallMs: q ? 3_000 : 6_000, holdMs: q ? 500 : 3_000 },
    soak: { seconds: a.soakSeconds ?? (q ? 3 : 300), sampleMs: q ? 500 : 10_000, idleMs: q ? 1_000 : 5_000, settleMs: q ? 1_000 : 60_000 },
    fake: { chunks: 20, delayMs: 10, slowMs: 1000, slowChunks: 900 },
  };
}

/** Heap and trace-buffer figures from the gateway's own /metrics (prom-client default metrics). */
async function gatewayMetrics(url) {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    const get = (name) => {
      const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
      return m ? Number(m[1]) : null;
    };
    const sumOf = (prefix) => {
      let total = null;
      for (const m of text.matchAll(new RegExp(`^(${prefix}[a-z_]*)(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'gm'))) total = (total ?? 0) + Number(m[2]);
      return total;
    };
    return {
      heap_used_mib: round((get('gateway_nodejs_heap_size_used_bytes') ?? NaN) / 2 ** 20, 1),
      heap_total_mib: round((get('gateway_nodejs_heap_size_total_bytes') ?? NaN) / 2 ** 20, 1),
      traces_dropped: sumOf('gateway_decision_traces_dropped'),
    };
  } catch {
    return {};
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const p = plan(args);
  const only = args.only ?? SECTIONS.filter((s) => (s !== 'soak' || args.soak) && s !== 'otel');
  if (args.otel && !only.includes('otel')) only.push('otel');
  const want = (s) => only.includes(s);
  const outFile = args.out ?? path.join(procs.ROOT, 'bench', 'results', 'latest.json');
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const cleanups = procs.cleanupStack(log);
  const cleanup = cleanups.run;

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-'));
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const report = {
    meta: {
      date: new Date().toISOString(),
      command,
      node: process.version,
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      os: `${os.type()} ${os.release()}`,
      memory_gib: round(os.totalmem() / 2 ** 30, 1),
      autocannon: require('autocannon/package.json').version,
      mode: args.quick ? 'quick' : 'full',
      store: args.servers ? 'Postgres 15 + Redis (--servers)' : 'embedded default (PGlite + in-process cache)',
      logging: 'shipped default (LOG_LEVEL unset = info: one pino JSON line per request, to a file)',
      runs_per_figure: p.runs,
      fd_limit: procs.childFdLimit(),
      clk_tck: procs.CLK_TCK,
      fake: p.fake,
    },
    sections: {},
  };

  try {
    log('building the gateway (nest build)…');
    const build = procs.buildGateway(`run-${process.pid}`);
    if (!args.keepBuild) cleanups.push(() => build.remove());
    report.meta.build_ms = build.ms;

    const fake = await procs.startFake(p.fake);
    cleanups.push(() => fake.stop());
    log(`fake upstream on ${fake.url} (pid ${fake.pid})`);

    const env = procs.gatewayEnv({ tmp, port: await require('../scripts/test-servers').freePort(), config: path.join(tmp, 'gateway.yaml'), dataDir: path.join(tmp, 'data') });
    fs.writeFileSync(env.GATEWAY_CONFIG, gatewayYaml(fake.url));
    if (args.servers) {
      const { startPostgres, startRedis } = require('../scripts/test-servers');
      const pg = await startPostgres();
      if (pg.skipped) throw new Error(`--servers: ${pg.skipped}`);
      cleanups.push(() => pg.stop());
      const redis = await startRedis();
      if (redis.skipped) throw new Error(`--servers: ${redis.skipped}`);
      cleanups.push(() => redis.stop());
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: redis.url, GATEWAY_KEY_PEPPER: crypto.randomBytes(32).toString('base64') });
      log(`Postgres ${pg.url}, Redis ${redis.url}`);
    }
    const nodeArgs = [...(args.nodeOptions ?? []), ...(args.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${args.cpuProf}`] : [])];
    let gw = null;
    let profiled = null;
    cleanups.push(() => gw?.stop());
    /** Starts a gateway (the first one under the profiler when --cpu-prof); same port and data dir each time. */
    const startGw = async () => {
      const started = Date.now();
      gw = await procs.startGateway({ main: build.main, env, port: Number(env.PORT), logFile: path.join(tmp, 'gateway.log'), nodeArgs: profiled ? (args.nodeOptions ?? []) : nodeArgs });
      if (!profiled && args.cpuProf) profiled = gw;
      const ms = Date.now() - started;
      log(`gateway on ${gw.url} (pid ${gw.pid}), up in ${ms} ms`);
      return { start_ms: ms, rss_idle_mib: round(procs.rssMiB(gw.pid), 1) };
    };
    /** The soak and the memory section each get a fresh gateway: what earlier sections grew (heap, RSS) must not hide or fake theirs. */
    const freshGw = async () => {
      await gw.stop('SIGTERM');
      gw = null;
      const fresh = await startGw();
      await runLoad({ url: gw.url + targets.gateway.path, connections: 32, seconds: p.warmupSeconds, body: chatBody(targets.gateway.model.json), headers: targets.gateway.headers });
      return fresh;
    };
    const first = await startGw();
    report.meta.gateway_start_ms = first.start_ms;
    report.meta.gateway_rss_idle_mib = first.rss_idle_mib;

    const targets = {
      direct: { url: fake.url, path: '/v1/chat/completions', model: { json: 'bench-model', delay: 'bench-delay', slow: 'bench-slow' }, headers: {} },
      gateway: { url: gw.url, path: '/v1/chat/completions', model: { json: 'bench', delay: 'bench-delay', slow: 'bench-slow' }, headers: { authorization: `Bearer ${KEY}` } },
    };

    // Sanity: one request each way must succeed before anything is measured.
    for (const side of ['direct', 'gateway']) {
      const t = targets[side];
      const res = await fetch(t.url + t.path, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: chatBody(t.model.json) });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${side}: first request answered ${res.status}: ${text.slice(0, 500)}\n${procs.tail(gw.logFile)}`);
    }

    log(`warm-up (${p.warmupSeconds} s each way, the gateway's JSON ${p.gatewayWarmupSeconds} s)…`);
    for (const side of ['direct', 'gateway']) {
      const t = targets[side];
      await runLoad({ url: t.url + t.path, connections: 32, seconds: side === 'gateway' ? p.gatewayWarmupSeconds : p.warmupSeconds, body: chatBody(t.model.json), headers: t.headers });
      await runStreams({ url: t.url, path: t.path, body: chatBody(t.model.delay, { stream: true }), headers: t.headers, concurrency: 8, seconds: p.warmupSeconds });
    }

    if ((want('chat') || want('stream')) && args.floor) {
      const floor = await procs.startFloorProxy('express', fake.port);
      cleanups.push(() => floor.stop());
      targets.floor = { url: floor.url, path: '/v1/chat/completions', model: targets.direct.model, headers: {}, pid: floor.pid };
      log(`Express floor proxy on ${floor.url} (pid ${floor.pid})`);
      await runLoad({ url: floor.url + targets.floor.path, connections: 32, seconds: p.warmupSeconds, body: chatBody(targets.floor.model.json), headers: {} });
    }
    if (want('chat') || want('responses') || want('otel') || want('stream')) {
      // The second round of the warm-up, after a pause: see lib/load.js warmUpTwice.
      log(`warm-up, second round after a ${p.warmupPauseMs / 1000} s pause…`);
      await warmUpSecondRound(
        sidesOf(targets).map((side) => {
          const t = targets[side];
          return { url: t.url + t.path, body: chatBody(t.model.json), headers: t.headers, seconds: side === 'gateway' ? p.gatewayRewarmSeconds : p.warmupSeconds };
        }),
        { pauseMs: p.warmupPauseMs },
      );
    }
    if (want('chat')) report.sections.chat = await chatSection(p, targets, gw, fake);
    if (want('responses')) report.sections.responses = await responsesSection(p, targets, gw);
    if (want('otel')) report.sections.otel = await otelSection(p, targets, gw, { build, env, tmp, cleanups });
    if (want('stream')) report.sections.stream = await streamSection(p, targets);
    if (want('soak')) {
      const fresh = await freshGw();
      report.sections.soak = { ...(await soakSection(p, targets, gw)), fresh_gateway: fresh };
    }
    if (want('memory')) {
      const fresh = await freshGw();
      report.sections.memory = { ...(await memorySection(p, targets, gw, fake)), fresh_gateway: fresh };
    }

    report.meta.gateway_rss_end_mib = round(procs.rssMiB(gw.pid), 1);
    report.meta.gateway_log = logSummary(gw.logFile);
    if (args.cpuProf) {
      log('stopping the gateway (SIGTERM) so the CPU profile is written…');
      await profiled.stop('SIGTERM');
      if (gw === profiled) gw = null;
      const profiles = fs.existsSync(args.cpuProf) ? fs.readdirSync(args.cpuProf).filter((f) => f.endsWith('.cpuprofile')) : [];
      report.meta.cpu_profiles = profiles.map((f) => path.join(args.cpuProf, f));
      if (profiles.length === 0) log(`WARNING: no .cpuprofile written in ${args.cpuProf}`);
      else {
        log(`CPU profile: ${report.meta.cpu_profiles.join(', ')}`);
        // The summary covers only the gateway's measured chat runs (not start-up, warm-up or the direct runs).
        const windows = (report.sections.chat?.levels ?? []).flatMap((l) => l.runs.gateway.map((r) => r.window_us));
        if (windows.length) {
          const { summarise, renderSummary } = require('./profile-summary');
          // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile: thread 0 is the event loop's (the others are worker threads, e.g. the embedded store's).
          const file = report.meta.cpu_profiles.find((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f)) ?? report.meta.cpu_profiles[0];
          const summaryFile = file.replace(/\.cpuprofile$/, '.summary.md');
          fs.writeFileSync(summaryFile, renderSummary(summarise(JSON.parse(fs.readFileSync(file, 'utf8')), 60, windows), 60));
          report.meta.cpu_profile_summary = summaryFile;
          log(`profile summary of the gateway's chat runs: ${summaryFile} (windows: --window=${windows.map((w) => w.join('-')).join(',')})`);
        }
      }
    }
  } finally {
    await cleanup();
  }

  report.budget = evaluateBudget(report);
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, JSON.stringify(report, null, 2) + '\n');
  process.stdout.write(renderMarkdown(report) + '\n');
  log(`wrote ${path.relative(process.cwd(), outFile) || outFile}`);
}

/** The sides a section alternates: direct, the Express floor with --floor, the gateway. */
const sidesOf = (targets) => (targets.floor ? ['direct', 'floor', 'gateway'] : ['direct', 'gateway']);
/** The sides in run `run`'s order: reversed every other run, so drift and noise fall on every side alike. */
const inTurn = (sides, run) => (run % 2 === 0 ? sides : [...sides].reverse());

/**
 * Non-streaming chat at 1, 32 and 128 connections, direct vs through the gateway (and, with
 * --floor, through the Express reference proxy), the order of the sides flipped every run.
 */
async function chatSection(p, targets, gw, fake) {
  const sides = sidesOf(targets);
  const levels = [];
  for (const connections of p.chat.connections) {
    const runs = Object.fromEntries(sides.map((s) => [s, []]));
    for (let run = 0; run < p.runs; run++) {
      for (const side of inTurn(sides, run)) {
        const t = targets[side];
        const pid = side === 'gateway' ? gw.pid : side === 'floor' ? t.pid : fake.pid;
        const cpu0 = procs.cpuTimes(pid);
        const th0 = procs.threadCpuTimes(pid);
        const t0 = process.hrtime.bigint();
        const r = await runLoad({ url: t.url + t.path, connections, seconds: p.chat.seconds, body: chatBody(t.model.json), headers: t.headers });
        const cpu1 = procs.cpuTimes(pid);
        const th1 = procs.threadCpuTimes(pid);
        // CPU of the process serving this side: the gateway through it, the fake when direct.
        const perReq = (seconds) => (r.requests > 0 ? round((seconds / r.requests) * 1e6, 1) : null);
        r.cpu_us_per_req = perReq(cpu1.user + cpu1.sys - cpu0.user - cpu0.sys);
        r.cpu_sys_us_per_req = perReq(cpu1.sys - cpu0.sys);
        // The JS thread apart from the rest (GC and compiler helpers, libuv pool, worker threads such as the embedded store's).
        r.cpu_main_us_per_req = perReq(th1.main - th0.main);
        r.cpu_other_threads_us_per_req = perReq(th1.others - th0.others);
        // CLOCK_MONOTONIC µs, the clock of V8's .cpuprofile timestamps: `profile-summary --window`.
        r.window_us = [Number(t0 / 1000n), Number(process.hrtime.bigint() / 1000n)];
        runs[side].push(r);
        await sleep(100);
      }
    }
    const pairs = runs.direct.map((d, i) => ({ d, g: runs.gateway[i] }));
    const keys = ['rps', 'p50', 'p90', 'p99', 'cpu_us_per_req', 'cpu_sys_us_per_req', 'cpu_main_us_per_req', 'cpu_other_threads_us_per_req'];
    const level = {
      connections,
      direct: summarise(runs.direct, keys),
      gateway: summarise(runs.gateway, keys),
      ...(runs.floor
        ? {
            floor: summarise(runs.floor, keys),
            // Paired by run: the gateway's CPU per request over the Express floor's run next to it.
            cpu_vs_floor: summary(runs.gateway.map((g, i) => g.cpu_us_per_req / runs.floor[i].cpu_us_per_req)),
          }
        : {}),
      // Paired by run: gateway minus the direct run next to it.
      added_ms: {
        p50: summary(pairs.map(({ d, g }) => g.p50 - d.p50)),
        p90: summary(pairs.map(({ d, g }) => g.p90 - d.p90)),
        p99: summary(pairs.map(({ d, g }) => g.p99 - d.p99)),
      },
      rps_ratio: summary(pairs.map(({ d, g }) => g.rps / d.rps)),
      totals: totals(runs),
      runs,
    };
    log(
      `chat c=${connections}: direct ${level.direct.rps.median} req/s p50 ${level.direct.p50.median} ms; gateway ${level.gateway.rps.median} req/s ` +
        `p50 ${level.gateway.p50.median} p99 ${level.gateway.p99.median} ms, ${level.gateway.cpu_us_per_req.median} µs CPU/req ` +
        `(main thread ${level.gateway.cpu_main_us_per_req.median}, other threads ${level.gateway.cpu_other_threads_us_per_req.median})` +
        (level.floor ? `; Express floor ${level.floor.cpu_us_per_req.median} µs CPU/req, gateway/floor ${round(level.cpu_vs_floor.median, 2)}` : ''),
    );
    levels.push(level);
  }
  return { seconds_per_run: p.chat.seconds, runs: p.runs, levels };
}

/**
 * Non-streaming Responses API calls through the gateway at the chat section's connection levels,
 * alternated with chat calls of the same question on the same gateway: CPU per request of each and
 * the ratio, i.e. what the second wire format costs over the one chat pipeline. There is no direct
 * side: the fake speaks chat completions, which is what the gateway sends upstream either way.
 */
async function responsesSection(p, targets, gw) {
  const t = targets.gateway;
  const paths = { chat: '/v1/chat/completions', responses: '/v1/responses' };
  const bodies = { chat: chatBody(t.model.json), responses: responsesBody(t.model.json) };
  const first = await fetch(gw.url + paths.responses, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: bodies.responses });
  const text = await first.text();
  if (first.status !== 200) throw new Error(`responses: first request answered ${first.status}: ${text.slice(0, 500)}`);
  await runLoad({ url: gw.url + paths.responses, connections: 32, seconds: p.warmupSeconds, body: bodies.responses, headers: t.headers });
  const levels = [];
  for (const connections of p.chat.connections) {
    const runs = { chat: [], responses: [] };
    for (let run = 0; run < p.runs; run++) {
      for (const side of run % 2 === 0 ? ['chat', 'responses'] : ['responses', 'chat']) {
        const cpu0 = procs.cpuTimes(gw.pid);
        const r = await runLoad({ url: gw.url + paths[side], connections, seconds: p.chat.seconds, body: bodies[side], headers: t.headers });
        const cpu1 = procs.cpuTimes(gw.pid);
        r.cpu_us_per_req = r.requests > 0 ? round(((cpu1.user + cpu1.sys - cpu0.user - cpu0.sys) / r.requests) * 1e6, 1) : null;
        runs[side].push(r);
        await sleep(100);
      }
    }
    const keys = ['rps', 'p50', 'p90', 'p99', 'cpu_us_per_req'];
    const level = {
      connections,
      chat: summarise(runs.chat, keys),
      responses: summarise(runs.responses, keys),
      // Paired by run: responses CPU per request over the chat run next to it.
      cpu_ratio: summary(runs.chat.map((c, i) => runs.responses[i].cpu_us_per_req / c.cpu_us_per_req)),
      totals: totals(runs),
      runs,
    };
    log(
      `responses c=${connections}: ${level.responses.rps.median} req/s p50 ${level.responses.p50.median} ms, ${level.responses.cpu_us_per_req.median} µs CPU/req; ` +
        `chat ${level.chat.cpu_us_per_req.median} µs CPU/req; responses/chat ${round(level.cpu_ratio.median, 3)}`,
    );
    levels.push(level);
  }
  return { seconds_per_run: p.chat.seconds, runs: p.runs, levels };
}

/**
 * `--otel`: what OpenTelemetry tracing costs (docs/architecture.md "OpenTelemetry traces"). A second
 * gateway, the same build and config, with OTEL_EXPORTER_OTLP_ENDPOINT at a local OTLP sink in its
 * own process; non-streaming chat runs alternate between the gateway with tracing off (the one the
 * other sections measure) and the one with it on, and each on run's CPU per request is divided by
 * the off run next to it. The on gateway's export counters and the sink's span count show that the
 * spans were really built and sent.
 */
async function otelSection(p, targets, gwOff, { build, env, tmp, cleanups }) {
  const sink = await startOtlpSink();
  cleanups.push(() => sink.stop());
  const port = await require('../scripts/test-servers').freePort();
  const onEnv = { ...env, PORT: String(port), GATEWAY_DATA_DIR: path.join(tmp, 'data-otel'), OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'gateway-bench' };
  const gwOn = await procs.startGateway({ main: build.main, env: onEnv, port, logFile: path.join(tmp, 'gateway-otel.log') });
  cleanups.push(() => gwOn.stop());
  log(`gateway with tracing on: ${gwOn.url} (pid ${gwOn.pid}), OTLP sink ${sink.url} (pid ${sink.pid})`);
  const t = targets.gateway;
  const body = chatBody(t.model.json);
  const gws = { off: gwOff, on: gwOn };
  await warmUpTwice([{ url: gwOn.url + t.path, body, headers: t.headers }], { seconds: p.gatewayWarmupSeconds, pauseMs: p.warmupPauseMs, rewarmSeconds: p.gatewayRewarmSeconds });
  // The off gateway rested through that: its own load again, so both sides start in service.
  await runLoad({ url: gwOff.url + t.path, connections: 32, seconds: p.gatewayRewarmSeconds, body, headers: t.headers });
  const levels = [];
  for (const connections of p.otel.connections) {
    const runs = { off: [], on: [] };
    for (let run = 0; run < p.runs; run++) {
      for (const side of run % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
        const gw = gws[side];
        const cpu0 = procs.cpuTimes(gw.pid);
        const r = await runLoad({ url: gw.url + t.path, connections, seconds: p.otel.seconds, body, headers: t.headers });
        const cpu1 = procs.cpuTimes(gw.pid);
        r.cpu_us_per_req = r.requests > 0 ? round(((cpu1.user + cpu1.sys - cpu0.user - cpu0.sys) / r.requests) * 1e6, 1) : null;
        runs[side].push(r);
        await sleep(100);
      }
    }
    const keys = ['rps', 'p50', 'p90', 'p99', 'cpu_us_per_req'];
    const level = {
      connections,
      off: summarise(runs.off, keys),
      on: summarise(runs.on, keys),
      // Paired by run: tracing-on CPU per request over the tracing-off run next to it.
      cpu_ratio: summary(runs.off.map((o, i) => runs.on[i].cpu_us_per_req / o.cpu_us_per_req)),
      totals: totals(runs),
      runs,
    };
    log(
      `otel c=${connections}: off ${level.off.cpu_us_per_req.median} µs CPU/req (${level.off.rps.median} req/s), ` +
        `on ${level.on.cpu_us_per_req.median} µs CPU/req (${level.on.rps.median} req/s); on/off ${round(level.cpu_ratio.median, 3)}`,
    );
    levels.push(level);
  }
  await sleep(500);
  const exported = await otelCounters(gwOn.url);
  const sinkStats = await sink.stats();
  log(`otel: ${exported.exported} spans exported, ${exported.dropped} dropped; the sink received ${sinkStats.spans} spans in ${sinkStats.requests} requests`);
  await gwOn.stop('SIGTERM');
  await sink.stop();
  return { seconds_per_run: p.otel.seconds, runs: p.runs, levels, spans: { ...exported, received: sinkStats.spans, export_requests: sinkStats.requests, bytes: sinkStats.bytes } };
}

/** The tracing gateway's span counters from its /metrics. */
async function otelCounters(url) {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const sum = (name) => [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'gm'))].reduce((a, m) => a + Number(m[1]), 0);
  return { exported: sum('gateway_otel_spans_exported_total'), dropped: sum('gateway_otel_spans_dropped_total') };
}

/**
 * Size of the gateway's log and its warn/error lines (the first few kept), to spot a run that failed
 * quietly (read a piece at a time: procs.eachLine).
 */
function logSummary(file) {
  let lines = 0;
  let badCount = 0;
  const first = [];
  const bytes = procs.eachLine(file, (l) => {
    if (l.length === 0) return;
    lines++;
    if (/"level":"(warn|error|fatal)"/.test(l) || !l.startsWith('{')) {
      badCount++;
      if (first.length < 5) first.push(l.slice(0, 400));
    }
  });
  return { bytes, lines, warn_or_error_lines: badCount, first };
}

function totals(runs) {
  const out = {};
  for (const side of Object.keys(runs)) {
    out[side] = { requests: 0, ok: 0, non2xx: 0, errors: 0, timeouts: 0 };
    for (const r of runs[side]) for (const k of Object.keys(out[side])) out[side][k] += r[k] ?? 0;
  }
  return out;
}

/** Streams with a delay between chunks: TTFB, per-chunk transit and gaps vs the fake's send times. */
async function streamSection(p, targets) {
  // With --floor, the Express reference proxy streams too: each event parsed and re-serialised, the
  // least a gateway does per chunk, so its added gap is what Node.js and Express cost on this machine.
  const sides = sidesOf(targets);
  const levels = [];
  for (const concurrency of p.stream.concurrency) {
    const runs = Object.fromEntries(sides.map((s) => [s, []]));
    for (let run = 0; run < p.runs; run++) {
      for (const side of inTurn(sides, run)) {
        const t = targets[side];
        const r = await runStreams({ url: t.url, path: t.path, body: chatBody(t.model.delay, { stream: true }), headers: t.headers, concurrency, seconds: p.stream.seconds });
        const ct = chunkTimings(r.streams, p.stream.chunks);
        const pt = percentiles(ct.ttfb);
        const pr = percentiles(ct.transit);
        const pg = percentiles(ct.gaps);
        runs[side].push({
          streams: r.streams.length,
          chunks: ct.chunks,
          ttfb_p50: round(pt(50)),
          ttfb_p99: round(pt(99)),
          transit_p50: round(pr(50)),
          transit_p99: round(pr(99)),
          transit_max: round(pr(100)),
          gap_p50: round(pg(50)),
          gap_p99: round(pg(99)),
          held: ct.held,
          missing: ct.missing,
          non2xx: r.non2xx,
          errors: r.errors,
        });
        await sleep(100);
      }
    }
    const pairs = runs.direct.map((d, i) => ({ d, g: runs.gateway[i] }));
    const keys = ['ttfb_p50', 'ttfb_p99', 'transit_p50', 'transit_p99', 'transit_max', 'gap_p50', 'gap_p99'];
    const level = {
      concurrency,
      chunks_per_stream: p.stream.chunks,
      interval_ms: p.stream.delayMs,
      direct: summarise(runs.direct, keys),
      gateway: summarise(runs.gateway, keys),
      ...(runs.floor
        ? {
            floor: summarise(runs.floor, keys),
            // The Express floor's own added figures, paired with the direct run of the same round.
            floor_added_ms: {
              ttfb_p50: summary(runs.direct.map((d, i) => runs.floor[i].ttfb_p50 - d.ttfb_p50)),
              between_chunks_p99: summary(runs.direct.map((d, i) => runs.floor[i].gap_p99 - d.gap_p99)),
            },
          }
        : {}),
      added_ms: {
        ttfb_p50: summary(pairs.map(({ d, g }) => g.ttfb_p50 - d.ttfb_p50)),
        ttfb_p99: summary(pairs.map(({ d, g }) => g.ttfb_p99 - d.ttfb_p99)),
        transit_p50: summary(pairs.map(({ d, g }) => g.transit_p50 - d.transit_p50)),
        transit_p99: summary(pairs.map(({ d, g }) => g.transit_p99 - d.transit_p99)),
        // Gaps are measured against the fake's own send times; the direct run's gaps (client and
        // loopback jitter on the same machine) are the floor taken off.
        between_chunks_p50: summary(pairs.map(({ d, g }) => g.gap_p50 - d.gap_p50)),
        between_chunks_p99: summary(pairs.map(({ d, g }) => g.gap_p99 - d.gap_p99)),
      },
      totals: Object.fromEntries(
        Object.entries(runs).map(([side, rs]) => [
          side,
          rs.reduce((a, r) => ({ streams: a.streams + r.streams, chunks: a.chunks + r.chunks, held: a.held + r.held, missing: a.missing + r.missing, non2xx: a.non2xx + r.non2xx, errors: a.errors + r.errors }), {
            streams: 0, chunks: 0, held: 0, missing: 0, non2xx: 0, errors: 0,
          }),
        ]),
      ),
      runs,
    };
    log(
      `stream c=${concurrency}: added TTFB p50 ${level.added_ms.ttfb_p50.median} ms, between chunks p50 ${level.added_ms.between_chunks_p50.median} ` +
        `p99 ${level.added_ms.between_chunks_p99.median} ms, held ${level.totals.gateway.held}, missing ${level.totals.gateway.missing}` +
        (level.floor_added_ms ? `; Express floor added TTFB p50 ${level.floor_added_ms.ttfb_p50.median}, between chunks p99 ${level.floor_added_ms.between_chunks_p99.median} ms` : ''),
    );
    levels.push(level);
  }
  return { runs: p.runs, seconds_per_run: p.stream.seconds, levels };
}

/** RSS of the gateway with N slow streams (a chunk every ~1 s) open at once. */
async function memorySection(p, targets, gw, fake) {
  const t = targets.gateway;
  const levels = [];
  /*
   * Idle: the gateway as it rests after the warm-up's load. V8 gives back what the load grew (the
   * young generation, old-space pages) in its memory reducer's collections, which start once the
   * heap's allocation rate has fallen, within its watchdog's 100 s at the latest: the figure is
   * read after p.memory.idleMs without a request, beside the one right after the load.
   */
  const rssAfterLoad = procs.rssMiB(gw.pid);
  const idleCurve = [];
  const idleStart = Date.now();
  while (Date.now() - idleStart < p.memory.idleMs) {
    await sleep(Math.min(5_000, p.memory.idleMs - (Date.now() - idleStart)));
    idleCurve.push({ s: round((Date.now() - idleStart) / 1000, 0), rss_mib: round(procs.rssMiB(gw.pid), 1) });
  }
  const idle = { seconds: p.memory.idleMs / 1000, rss_after_load_mib: round(rssAfterLoad, 1), rss_idle_mib: idleCurve.at(-1)?.rss_mib ?? null, curve: idleCurve, ...(await gatewayMetrics(gw.url)) };
  log(`memory idle: RSS ${idle.rss_after_load_mib} MiB right after the load, ${idle.rss_idle_mib} after ${idle.seconds} s idle`);
  for (const count of p.memory.counts) {
    await sleep(500);
    const rssBefore = procs.rssMiB(gw.pid);
    const heapBefore = await gatewayMetrics(gw.url);
    const fds0 = procs.openFds(gw.pid);
    // Connections the gateway has not accepted yet ≈ started − (its new descriptors − one upstream
    // socket per open stream); kept under 256 so its listen backlog (511) never overflows.
    const room = (st) => 256 - (st.started - (procs.openFds(gw.pid) - fds0 - st.open));
    const h = openSlowStreams({ url: t.url, path: t.path, body: chatBody(t.model.slow, { stream: true }), headers: t.headers, count, room });
    const started = Date.now();
    // Settled when every stream is open or failed, or when neither the open count nor the
    // gateway's descriptor count (connections it has accepted) has moved for stallMs.
    let last = '';
    let lastChange = Date.now();
    for (;;) {
      await sleep(100);
      const s = h.state;
      const now = `${s.open}/${procs.openFds(gw.pid)}`;
      if (now !== last) {
        last = now;
        lastChange = Date.now();
      }
      if (s.open + s.non2xx + s.errors >= count) break;
      if (Date.now() - started > p.memory.settleMs) break;
      if (s.started >= count && Date.now() - lastChange > p.memory.stallMs) break;
    }
    const openMs = Date.now() - started;
    const samples = [];
    const holdUntil = Date.now() + p.memory.holdMs;
    do {
      samples.push(procs.rssMiB(gw.pid));
      await sleep(250);
    } while (Date.now() < holdUntil);
    const fds = procs.openFds(gw.pid);
    const heapWith = await gatewayMetrics(gw.url);
    const fakeOpen = (await fake.stats().catch(() => ({}))).openStreams ?? null;
    const s = { ...h.state };
    await h.closeAll();
    await sleep(p.memory.holdMs);
    const rssMax = Math.max(...samples);
    const level = {
      requested: count,
      open: s.open,
      pending: count - s.open - s.non2xx - s.errors,
      non2xx: s.non2xx,
      errors: s.errors,
      first_errors: s.firstErrors,
      first_non2xx: s.firstNon2xx,
      ended_early: s.ended,
      upstream_streams_open_at_fake: fakeOpen,
      gateway_fds: fds,
      seconds_to_open: round(openMs / 1000, 1),
      rss_before_mib: round(rssBefore, 1),
      rss_mib: round(rssMax, 1),
      rss_per_open_stream_kib: s.open > 0 ? round(((rssMax - rssBefore) * 1024) / s.open, 1) : null,
      rss_after_close_mib: round(procs.rssMiB(gw.pid), 1),
      heap_used_before_mib: heapBefore.heap_used_mib ?? null,
      heap_used_mib: heapWith.heap_used_mib ?? null,
    };
    log(`memory ${count} streams: ${level.open} open, ${level.pending} pending, ${level.errors} errors; RSS ${level.rss_mib} MiB (before ${level.rss_before_mib})`);
    levels.push(level);
  }
  return { chunk_every_ms: p.fake.slowMs, idle, levels };
}

/**
 * The gateway's RSS at rest: the lowest of one sample a second over `ms`, beside the first sample.
 * A resting gateway's RSS still swings by tens of MiB for tens of seconds when a periodic job runs
 * (the usage rollups' beat once a minute, visible in the soak's trajectory and the memory section's
 * idle curve) and then comes back, so one sample read growth into whichever swing it met; memory the
 * soak kept is in every sample, so in the lowest too.
 */
async function restingRss(pid, ms) {
  const samples = [procs.rssMiB(pid)];
  for (const end = Date.now() + ms; Date.now() < end; ) {
    await sleep(1_000);
    samples.push(procs.rssMiB(pid));
  }
  return { rss_mib: round(Math.min(...samples), 1), rss_first_sample_mib: round(samples[0], 1), rss_samples: samples.length };
}

/** Mixed traffic for p.soak.seconds: JSON under autocannon plus delayed and instant streams (some aborted). */
async function soakSection(p, targets, gw) {
  const t = targets.gateway;
  const mix = (seconds) =>
    Promise.all([
      runLoad({ url: t.url + t.path, connections: 8, seconds, body: chatBody(t.model.json), headers: t.headers }),
      runStreams({ url: t.url, path: t.path, body: chatBody(t.model.delay, { stream: true }), headers: t.headers, concurrency: 8, seconds, abortEvery: 20 }),
      runStreams({ url: t.url, path: t.path, body: chatBody(t.model.json, { stream: true }), headers: t.headers, concurrency: 4, seconds }),
    ]);
  log('soak: warm-up…');
  await mix(Math.min(30, Math.max(0.5, p.soak.seconds / 10)));
  await sleep(p.soak.idleMs);
  const before = { ...(await restingRss(gw.pid, p.soak.settleMs)), ...(await gatewayMetrics(gw.url)) };
  log(`soak: ${p.soak.seconds} s of mixed traffic (RSS before ${before.rss_mib} MiB)…`);
  const trajectory = [];
  const t0 = Date.now();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      trajectory.push({ s: round((Date.now() - t0) / 1000, 1), rss_mib: round(procs.rssMiB(gw.pid), 1) });
      await sleep(p.soak.sampleMs);
    }
  })();
  const [json, delayed, instant] = await mix(p.soak.seconds);
  sampling = false;
  await sampler;
  await sleep(p.soak.idleMs);
  const after = { ...(await restingRss(gw.pid, p.soak.settleMs)), ...(await gatewayMetrics(gw.url)) };
  const streams = [delayed, instant];
  const section = {
    seconds: p.soak.seconds,
    before,
    after,
    rss_growth_mib: round(after.rss_mib - before.rss_mib, 1),
    heap_growth_mib: after.heap_used_mib != null && before.heap_used_mib != null ? round(after.heap_used_mib - before.heap_used_mib, 1) : null,
    rss_peak_mib: Math.max(...trajectory.map((x) => x.rss_mib)),
    trajectory,
    json: { requests: json.requests, ok: json.ok, rps: json.rps, p50: json.p50, p99: json.p99, non2xx: json.non2xx, errors: json.errors, timeouts: json.timeouts },
    streams: {
      completed: streams.reduce((a, r) => a + r.streams.length - r.aborted, 0),
      aborted_by_client: streams.reduce((a, r) => a + r.aborted, 0),
      non2xx: streams.reduce((a, r) => a + r.non2xx, 0),
      errors: streams.reduce((a, r) => a + r.errors, 0),
    },
  };
  log(`soak: RSS ${before.rss_mib} → ${after.rss_mib} MiB (peak ${section.rss_peak_mib}); heap ${before.heap_used_mib} → ${after.heap_used_mib} MiB`);
  return section;
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
