#!/usr/bin/env node
'use strict';
/**
 * `npm run bench:ab [-- options]`: one change's effect on CPU per request, measured on a noisy
 * machine. Builds the gateway twice, at a commit (`--base`, default HEAD, extracted with `git
 * archive`) and from the working tree, starts both beside the fake upstream (and with --floor the
 * Express reference proxy of `npm run bench:floor`), and alternates the same non-streaming chat load
 * between them, the order rotating every run, so what the machine's other work costs falls on every
 * side alike. Each figure is paired by run (work over base, each over the floor), median (min–max).
 * Writes a small JSON (`--out`, default bench/results/ab-latest.json) and prints a table. Each
 * gateway run also keeps the largest event loop delay the gateway saw in it (`loop_delay_max_ms`),
 * and a run that answered no request is reported at once with the end of that gateway's log.
 *
 * Options:
 *   --base=REV           the commit to compare with (default HEAD)
 *   --connections=32,1   concurrency levels (default 32,1)
 *   --runs=N             runs per side and level (default 6)
 *   --seconds=N          seconds per run (default 6)
 *   --warmup=N           seconds of load on each side before the runs (default 15: the embedded
 *                        store's WebAssembly is still being optimised in the background for a while)
 *   --warmup-pause=N     then a pause of N seconds (default 20) and a second round of
 *   --rewarm=N           N seconds on each side (default 10): V8 re-optimises much of a gateway's
 *                        request path after its first pause (lib/load.js warmUpTwice)
 *   --floor              also the Express floor proxy, in the same alternation
 *   --nest-floor         also the NestJS floor proxy (the same handler as a Nest controller on
 *                        Express, bench/lib/floor-proxy.js): what the framework alone costs, each
 *                        gateway side over it, and it over the Express floor with --floor
 *   --rate=N             open loop: N requests per second on each side (autocannon overallRate) instead
 *                        of as many as the connections get answered; CPU per request then compares at
 *                        one throughput (it falls as throughput rises: more work per wake-up)
 *   --concurrent         load every side at the same time in each run instead of one after the
 *                        other: on a machine whose other load comes and goes, the pairs of a run
 *                        then share it exactly (each side gets its own connections)
 *   --tree=DIR           a work side from another copy of the sources (a folder with src/,
 *                        tsconfig.json, nest-cli.json, .swcrc; under bench/.build so that it resolves the
 *                        same node_modules) instead of the working tree: an experiment. Repeatable:
 *                        every tree is a side of its own (named after its folder), all alternated
 *   --servers            both gateways on throwaway Postgres 15 + Redis (each its own database)
 *   --stream             also streams (32 at once, 20 chunks 10 ms apart): the added gap p99 of each
 *   --out=FILE           where to write the JSON
 *   --node-options="…"   extra Node/V8 flags for every gateway
 *   --work-node-options="…" extra Node/V8 flags for the work side(s) only: a flag's own effect
 *   --base-env="NAME=value …" / --work-env="…"  environment of one side on top of `npm start`'s
 *                        (`NAME=` removes one of its variables): a variable's own effect
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const procs = require('./lib/procs');
const { runLoad, warmUpTwice } = require('./lib/load');
const { runStreams, chunkTimings } = require('./lib/streams');
const { percentiles, summary, summarise, round } = require('./lib/stats');
const { KEY, chatBody, gatewayYaml } = require('./lib/workload');

const log = (msg) => process.stderr.write(`[ab ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parseArgs(argv) {
  const a = { base: 'HEAD', connections: [32, 1], runs: 6, seconds: 6, warmup: 15, warmupPause: 20, rewarm: 10, floor: false, nestFloor: false, concurrent: false, rate: null, servers: false, stream: false, out: null, nodeOptions: [], workNodeOptions: [], baseEnv: [], workEnv: [], trees: [] };
  for (const arg of argv) {
    const [k, v] = arg.split(/=(.*)/s, 2);
    switch (k) {
      case '--base': a.base = v; break;
      case '--connections': a.connections = v.split(',').map(Number); break;
      case '--runs': a.runs = Number(v); break;
      case '--seconds': a.seconds = Number(v); break;
      case '--warmup': a.warmup = Number(v); break;
      case '--warmup-pause': a.warmupPause = Number(v); break;
      case '--rewarm': a.rewarm = Number(v); break;
      case '--floor': a.floor = true; break;
      case '--nest-floor': a.nestFloor = true; break;
      case '--concurrent': a.concurrent = true; break;
      case '--rate': a.rate = Number(v); break;
      case '--tree': a.trees.push(path.resolve(v)); break;
      case '--servers': a.servers = true; break;
      case '--stream': a.stream = true; break;
      case '--out': a.out = path.resolve(v); break;
      case '--node-options': a.nodeOptions = v.split(/\s+/).filter(Boolean); break;
      case '--work-node-options': a.workNodeOptions = v.split(/\s+/).filter(Boolean); break;
      case '--base-env': a.baseEnv = v.split(/\s+/).filter(Boolean); break;
      case '--work-env': a.workEnv = v.split(/\s+/).filter(Boolean); break;
      case '--help': case '-h':
        process.stdout.write(fs.readFileSync(__filename, 'utf8').split('*/')[0].replace(/^#!.*\n'use strict';\n\/\*\*\n/, '').replace(/^ \* ?/gm, '') + '\n');
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${arg} (see --help)`);
    }
  }
  return a;
}

/**
 * The gateway's largest event loop delay since the last read, in ms (prom-client's
 * `nodejs_eventloop_lag_max_seconds`, whose window starts again at every scrape); null when
 * unreadable. Its monitor is a 10 ms timer and reports whole intervals, so a free loop reads ≈ 10
 * and a loop held for 500 ms ≈ 510. A run that answered nothing shows whether the gateway's thread
 * was stuck.
 */
async function loopDelayMaxMs(url) {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    const m = /^gateway_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
    return m ? round(Number(m[1]) * 1000, 1) : null;
  } catch {
    return null;
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const outFile = args.out ?? path.join(procs.ROOT, 'bench', 'results', 'ab-latest.json');
  const cleanups = procs.cleanupStack(log);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-ab-'));
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const name = `ab-${process.pid}`;
  cleanups.push(() => fs.rmSync(path.join(procs.ROOT, 'bench', '.build', `${name}-base`), { recursive: true, force: true }));
  const report = {
    meta: {
      date: new Date().toISOString(),
      command: `npm run bench:ab${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      node: process.version,
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      loadavg_start: os.loadavg().map((x) => round(x, 2)),
      store: args.servers ? 'Postgres 15 + Redis (--servers)' : 'embedded default (PGlite + in-process cache)',
      runs: args.runs,
      seconds_per_run: args.seconds,
      rate_per_side: args.rate,
      sides_loaded: args.concurrent ? 'at the same time' : 'one after the other, order rotated',
    },
    levels: [],
  };
  try {
    const { tree, commit } = procs.extractCommit(args.base, `${name}-base`);
    report.meta.base = commit;
    // The sides compared with base: the working tree, or each --tree (named after its folder; a tree's folder is often `…/<name>/tree`).
    const works = args.trees.length ? args.trees.map((t) => ({ side: path.basename(path.basename(t) === 'tree' ? path.dirname(t) : t), tree: t })) : [{ side: 'work', tree: undefined }];
    report.meta.work = works.map((w) => (w.tree ? path.relative(procs.ROOT, w.tree) : 'working tree')).join(', ');
    log(`building ${args.base} (${commit}) and ${report.meta.work}…`);
    const builds = { base: procs.buildGateway(`${name}-base`, { tree }) };
    for (const [i, w] of works.entries()) {
      cleanups.push(() => fs.rmSync(path.join(procs.ROOT, 'bench', '.build', `${name}-w${i}`), { recursive: true, force: true }));
      builds[w.side] = procs.buildGateway(`${name}-w${i}`, { tree: w.tree });
    }
    const gatewaySides = ['base', ...works.map((w) => w.side)];

    const fake = await procs.startFake({ chunks: 20, delayMs: 10, slowMs: 1000, slowChunks: 900 });
    cleanups.push(() => fake.stop());
    const config = path.join(tmp, 'gateway.yaml');
    fs.writeFileSync(config, gatewayYaml(fake.url));
    let servers = null;
    if (args.servers) {
      const { startPostgres, startRedis } = require('../scripts/test-servers');
      const pg = await startPostgres();
      if (pg.skipped) throw new Error(`--servers: ${pg.skipped}`);
      cleanups.push(() => pg.stop());
      const redis = await startRedis();
      if (redis.skipped) throw new Error(`--servers: ${redis.skipped}`);
      cleanups.push(() => redis.stop());
      servers = { pg, redis };
    }
    const targets = {};
    for (const [i, side] of gatewaySides.entries()) {
      const port = await require('../scripts/test-servers').freePort();
      const env = procs.gatewayEnv({ tmp, port, config, dataDir: path.join(tmp, `data-${side}`) });
      if (servers) {
        // Each its own database of the one server, and its own Redis database: the two never share state.
        const db = `ab_${side}`;
        await createDatabase(servers.pg.url, db);
        Object.assign(env, { DATABASE_URL: servers.pg.url.replace(/\/[^/?]*(\?|$)/, `/${db}$1`), REDIS_URL: `${servers.redis.url.replace(/\/\d*$/, '')}/${i + 1}`, GATEWAY_KEY_PEPPER: crypto.randomBytes(32).toString('base64') });
      }
      const gw = await procs.startGateway({ main: builds[side].main, env, port, logFile: path.join(tmp, `gateway-${side}.log`), nodeArgs: side === 'base' ? args.nodeOptions : [...args.nodeOptions, ...args.workNodeOptions], envOverrides: side === 'base' ? args.baseEnv : args.workEnv });
      cleanups.push(() => gw.stop());
      targets[side] = { url: gw.url, pid: gw.pid, logFile: gw.logFile, model: 'bench', delay: 'bench-delay', headers: { authorization: `Bearer ${KEY}` } };
      log(`${side}: ${gw.url} (pid ${gw.pid})`);
    }
    if (args.floor) {
      const floor = await procs.startFloorProxy('express', fake.port);
      cleanups.push(() => floor.stop());
      targets.floor = { url: floor.url, pid: floor.pid, model: 'bench-model', headers: {} };
      log(`floor: ${floor.url} (pid ${floor.pid})`);
    }
    if (args.nestFloor) {
      const nest = await procs.startFloorProxy('nest', fake.port);
      cleanups.push(() => nest.stop());
      targets['nest-floor'] = { url: nest.url, pid: nest.pid, model: 'bench-model', headers: {} };
      log(`nest floor: ${nest.url} (pid ${nest.pid})`);
    }
    const sides = Object.keys(targets);
    log(`warm-up: ${args.warmup} s each, a ${args.warmupPause} s pause, ${args.rewarm} s each again…`);
    await warmUpTwice(
      sides.map((side) => ({ url: `${targets[side].url}/v1/chat/completions`, body: chatBody(targets[side].model), headers: targets[side].headers })),
      { seconds: args.warmup, pauseMs: args.warmupPause * 1000, rewarmSeconds: args.rewarm },
    );

    for (const connections of args.connections) {
      const runs = Object.fromEntries(sides.map((s) => [s, []]));
      /** One run of one side: its load, and the CPU its process spent on it. */
      const measure = async (side) => {
        const t = targets[side];
        const gateway = gatewaySides.includes(side);
        // A gateway's event loop delay is read before (which starts its window) and after the run.
        if (gateway) await loopDelayMaxMs(t.url);
        const th0 = procs.threadCpuTimes(t.pid);
        const r = await runLoad({ url: `${t.url}/v1/chat/completions`, connections, seconds: args.seconds, body: chatBody(t.model), headers: t.headers, overallRate: args.rate ?? undefined });
        const th1 = procs.threadCpuTimes(t.pid);
        const loopMax = gateway ? await loopDelayMaxMs(t.url) : undefined;
        if (r.requests === 0) {
          log(`warning: ${side} answered no request in a ${args.seconds} s run (event loop delay at most ${loopMax ?? '?'} ms); its log ends:\n${gateway ? procs.tail(t.logFile, 2000) : '(no log)'}`);
        }
        const per = (s) => (r.requests > 0 ? round((s / r.requests) * 1e6, 1) : null);
        runs[side].push({
          ...(loopMax !== undefined ? { loop_delay_max_ms: loopMax } : {}),
          rps: r.rps,
          p50: r.p50,
          p99: r.p99,
          cpu_us_per_req: per(th1.main + th1.others - th0.main - th0.others),
          cpu_main_us_per_req: per(th1.main - th0.main),
          cpu_other_threads_us_per_req: per(th1.others - th0.others),
          requests: r.requests,
          failed: r.non2xx + r.errors + r.timeouts,
        });
      };
      for (let run = 0; run < args.runs; run++) {
        if (args.concurrent) {
          // Every side loaded over the same seconds: whatever else the machine does then falls on each alike.
          await Promise.all(sides.map(measure));
        } else {
          // Every side in every position: rotate the order by one each run.
          for (const side of sides.map((_, i) => sides[(i + run) % sides.length])) await measure(side);
        }
        await sleep(100);
      }
      const keys = ['rps', 'p50', 'p99', 'cpu_us_per_req', 'cpu_main_us_per_req', 'cpu_other_threads_us_per_req'];
      const ratio = (a, b, k = 'cpu_us_per_req') => summary(runs[a].map((x, i) => x[k] / runs[b][i][k]));
      const level = {
        connections,
        ...Object.fromEntries(sides.map((s) => [s, summarise(runs[s], keys)])),
        over_base: Object.fromEntries(gatewaySides.slice(1).map((w) => [w, { cpu: ratio(w, 'base'), main: ratio(w, 'base', 'cpu_main_us_per_req'), rps: ratio(w, 'base', 'rps') }])),
        ...(targets.floor ? { over_floor: Object.fromEntries([...gatewaySides, ...(targets['nest-floor'] ? ['nest-floor'] : [])].map((g) => [g, ratio(g, 'floor')])) } : {}),
        ...(targets['nest-floor'] ? { over_nest_floor: Object.fromEntries(gatewaySides.map((g) => [g, ratio(g, 'nest-floor')])) } : {}),
        failed: Object.fromEntries(sides.map((s) => [s, runs[s].reduce((n, x) => n + x.failed, 0)])),
        runs,
      };
      log(
        `c=${connections}: CPU µs/req ` +
          sides.map((s) => `${s} ${level[s].cpu_us_per_req.median}`).join(', ') +
          '; over base ' +
          Object.entries(level.over_base).map(([w, r]) => `${w} ${r.cpu.median} (${r.cpu.min}–${r.cpu.max})`).join(', ') +
          (level.over_floor ? '; over floor ' + Object.entries(level.over_floor).map(([g, r]) => `${g} ${r.median}`).join(', ') : '') +
          (level.over_nest_floor ? '; over nest floor ' + Object.entries(level.over_nest_floor).map(([g, r]) => `${g} ${r.median}`).join(', ') : ''),
      );
      report.levels.push(level);
    }

    if (args.stream) report.stream = await streamPairs(args, targets, fake, gatewaySides);
    report.rss_mib = Object.fromEntries(gatewaySides.map((s) => [s, round(procs.rssMiB(targets[s].pid), 1)]));
    report.meta.loadavg_end = os.loadavg().map((x) => round(x, 2));
  } finally {
    await cleanups.run();
  }
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, JSON.stringify(report, null, 2) + '\n');
  process.stdout.write(render(report) + '\n');
  log(`wrote ${path.relative(process.cwd(), outFile) || outFile}`);
}

/** 32 streams at once on each gateway and directly, alternated: the added gap p99 (gateway − the direct run next to it). */
async function streamPairs(args, targets, fake, gatewaySides) {
  const direct = { url: fake.url, delay: 'bench-delay', headers: {} };
  const runs = Object.fromEntries(gatewaySides.map((s) => [s, []]));
  for (let run = 0; run < args.runs; run++) {
    for (const side of gatewaySides.map((_, i) => gatewaySides[(i + run) % gatewaySides.length])) {
      const gap = async (t) => {
        const r = await runStreams({ url: t.url, path: '/v1/chat/completions', body: chatBody(t.delay, { stream: true }), headers: t.headers, concurrency: 32, seconds: 5 });
        const ct = chunkTimings(r.streams, 20);
        return { gap_p99: percentiles(ct.gaps)(99), ttfb_p50: percentiles(ct.ttfb)(50), held: ct.held, missing: ct.missing };
      };
      const d = await gap(direct);
      const g = await gap(targets[side]);
      runs[side].push({ added_gap_p99: round(g.gap_p99 - d.gap_p99), added_ttfb_p50: round(g.ttfb_p50 - d.ttfb_p50), held: g.held, missing: g.missing });
    }
  }
  const out = Object.fromEntries(gatewaySides.map((s) => [s, summarise(runs[s], ['added_gap_p99', 'added_ttfb_p50'])]));
  log(`stream 32: added gap p99 ${gatewaySides.map((s) => `${s} ${out[s].added_gap_p99.median}`).join(', ')} ms`);
  return { ...out, runs };
}

async function createDatabase(url, name) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    // Quoted: a --tree side is named after its folder, which may hold '-' or '.'.
    const id = `"${name.replace(/"/g, '""')}"`;
    await c.query(`DROP DATABASE IF EXISTS ${id}`);
    await c.query(`CREATE DATABASE ${id}`);
  } finally {
    await c.end();
  }
}

function render(r) {
  const mm = (s, d = 0) => (s && s.median !== null ? `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})` : '—');
  const out = [`### A/B — ${r.meta.date.slice(0, 16)} · base ${r.meta.base} vs ${r.meta.work} · ${r.meta.store} · ${r.meta.runs} × ${r.meta.seconds_per_run} s per side · load ${r.meta.loadavg_start?.[0]}`, ''];
  out.push('| conns | side | req/s | CPU µs/req | main thread | other threads | over base | over floor | over Nest floor |');
  out.push('|---:|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const l of r.levels) {
    for (const side of ['floor', 'nest-floor', 'base', ...Object.keys(l.over_base)]) {
      if (!l[side]) continue;
      const s = l[side];
      const overBase = l.over_base[side] ? mm(l.over_base[side].cpu, 3) : '';
      const overFloor = l.over_floor?.[side] ? mm(l.over_floor[side], 2) : '';
      const overNest = l.over_nest_floor?.[side] ? mm(l.over_nest_floor[side], 2) : '';
      out.push(`| ${l.connections} | ${side} | ${mm(s.rps)} | ${mm(s.cpu_us_per_req)} | ${mm(s.cpu_main_us_per_req)} | ${mm(s.cpu_other_threads_us_per_req)} | ${overBase} | ${overFloor} | ${overNest} |`);
    }
  }
  if (r.stream) {
    const sides = Object.keys(r.stream).filter((k) => k !== 'runs');
    out.push('', `Streams (32 at once): added gap p99 ${sides.map((s) => `${s} ${mm(r.stream[s].added_gap_p99, 3)}`).join(', ')} ms; added TTFB p50 ${sides.map((s) => `${s} ${mm(r.stream[s].added_ttfb_p50, 3)}`).join(', ')} ms`);
  }
  if (r.rss_mib) out.push('', `RSS at the end (MiB): ${Object.entries(r.rss_mib).map(([s, v]) => `${s} ${v}`).join(', ')}`);
  return out.join('\n');
}

main().catch((err) => {
  process.stderr.write(`bench:ab failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
