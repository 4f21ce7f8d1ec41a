#!/usr/bin/env node
'use strict';
/**
 * `npm run bench:ab [-- options]`: one change's effect on CPU per request, measured on a noisy
 * machine. Builds the gateway twice, at a commit (`--base`, default HEAD, extracted with `git
 * archive`) and from the working tree, starts both beside the fake upstream (and with --floor the
 * Express reference proxy of `npm run bench:floor`), and alternates the same non-streaming chat load
 * between them, the order rotating every run, so what the machine's other work costs falls on every
 * side alike. Each figure is paired by run (work over base, each over the floor), median (min–max).
 * Writes a small JSON (`--out`, default bench/results/ab-latest.json) and prints a table.
 *
 * Options:
 *   --base=REV           the commit to compare with (default HEAD)
 *   --connections=32,1   concurrency levels (default 32,1)
 *   --runs=N             runs per side and level (default 6)
 *   --seconds=N          seconds per run (default 6)
 *   --warmup=N           seconds of load on each side before the runs (default 15: the embedded
 *                        store's WebAssembly is still being optimised in the background for a while)
 *   --floor              also the Express floor proxy, in the same alternation
 *   --servers            both gateways on throwaway Postgres 15 + Redis (each its own database)
 *   --stream             also streams (32 at once, 20 chunks 10 ms apart): the added gap p99 of each
 *   --out=FILE           where to write the JSON
 *   --node-options="…"   extra Node/V8 flags for both gateways
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const procs = require('./lib/procs');
const { runLoad } = require('./lib/load');
const { runStreams, chunkTimings } = require('./lib/streams');
const { percentiles, summary, summarise, round } = require('./lib/stats');
const { KEY, chatBody, gatewayYaml } = require('./lib/workload');

const log = (msg) => process.stderr.write(`[ab ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parseArgs(argv) {
  const a = { base: 'HEAD', connections: [32, 1], runs: 6, seconds: 6, warmup: 15, floor: false, servers: false, stream: false, out: null, nodeOptions: [] };
  for (const arg of argv) {
    const [k, v] = arg.split(/=(.*)/s, 2);
    switch (k) {
      case '--base': a.base = v; break;
      case '--connections': a.connections = v.split(',').map(Number); break;
      case '--runs': a.runs = Number(v); break;
      case '--seconds': a.seconds = Number(v); break;
      case '--warmup': a.warmup = Number(v); break;
      case '--floor': a.floor = true; break;
      case '--servers': a.servers = true; break;
      case '--stream': a.stream = true; break;
      case '--out': a.out = path.resolve(v); break;
      case '--node-options': a.nodeOptions = v.split(/\s+/).filter(Boolean); break;
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

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const outFile = args.out ?? path.join(procs.ROOT, 'bench', 'results', 'ab-latest.json');
  const cleanups = procs.cleanupStack(log);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-ab-'));
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const name = `ab-${process.pid}`;
  cleanups.push(() => fs.rmSync(path.join(procs.ROOT, 'bench', '.build', `${name}-base`), { recursive: true, force: true }));
  cleanups.push(() => fs.rmSync(path.join(procs.ROOT, 'bench', '.build', `${name}-work`), { recursive: true, force: true }));
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
    },
    levels: [],
  };
  try {
    const { tree, commit } = procs.extractCommit(args.base, `${name}-base`);
    report.meta.base = commit;
    log(`building ${args.base} (${commit}) and the working tree…`);
    const builds = { base: procs.buildGateway(`${name}-base`, { tree }), work: procs.buildGateway(`${name}-work`) };

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
    for (const [i, side] of ['base', 'work'].entries()) {
      const port = await require('../scripts/test-servers').freePort();
      const env = procs.gatewayEnv({ tmp, port, config, dataDir: path.join(tmp, `data-${side}`) });
      if (servers) {
        // Each its own database of the one server, and its own Redis database: the two never share state.
        const db = `ab_${side}`;
        await createDatabase(servers.pg.url, db);
        Object.assign(env, { DATABASE_URL: servers.pg.url.replace(/\/[^/?]*(\?|$)/, `/${db}$1`), REDIS_URL: `${servers.redis.url.replace(/\/\d*$/, '')}/${i + 1}`, GATEWAY_KEY_PEPPER: crypto.randomBytes(32).toString('base64') });
      }
      const gw = await procs.startGateway({ main: builds[side].main, env, port, logFile: path.join(tmp, `gateway-${side}.log`), nodeArgs: args.nodeOptions });
      cleanups.push(() => gw.stop());
      targets[side] = { url: gw.url, pid: gw.pid, model: 'bench', delay: 'bench-delay', headers: { authorization: `Bearer ${KEY}` } };
      log(`${side}: ${gw.url} (pid ${gw.pid})`);
    }
    if (args.floor) {
      const floor = await procs.startFloorProxy('express', fake.port);
      cleanups.push(() => floor.stop());
      targets.floor = { url: floor.url, pid: floor.pid, model: 'bench-model', headers: {} };
      log(`floor: ${floor.url} (pid ${floor.pid})`);
    }
    const sides = Object.keys(targets);
    log('warm-up…');
    for (const side of sides) {
      const t = targets[side];
      await runLoad({ url: `${t.url}/v1/chat/completions`, connections: 32, seconds: args.warmup, body: chatBody(t.model), headers: t.headers });
    }

    for (const connections of args.connections) {
      const runs = Object.fromEntries(sides.map((s) => [s, []]));
      for (let run = 0; run < args.runs; run++) {
        // Every side in every position: rotate the order by one each run.
        const order = sides.map((_, i) => sides[(i + run) % sides.length]);
        for (const side of order) {
          const t = targets[side];
          const th0 = procs.threadCpuTimes(t.pid);
          const r = await runLoad({ url: `${t.url}/v1/chat/completions`, connections, seconds: args.seconds, body: chatBody(t.model), headers: t.headers });
          const th1 = procs.threadCpuTimes(t.pid);
          const per = (s) => (r.requests > 0 ? round((s / r.requests) * 1e6, 1) : null);
          runs[side].push({
            rps: r.rps,
            p50: r.p50,
            p99: r.p99,
            cpu_us_per_req: per(th1.main + th1.others - th0.main - th0.others),
            cpu_main_us_per_req: per(th1.main - th0.main),
            cpu_other_threads_us_per_req: per(th1.others - th0.others),
            requests: r.requests,
            failed: r.non2xx + r.errors + r.timeouts,
          });
          await sleep(100);
        }
      }
      const keys = ['rps', 'p50', 'p99', 'cpu_us_per_req', 'cpu_main_us_per_req', 'cpu_other_threads_us_per_req'];
      const ratio = (a, b, k = 'cpu_us_per_req') => summary(runs[a].map((x, i) => x[k] / runs[b][i][k]));
      const level = {
        connections,
        ...Object.fromEntries(sides.map((s) => [s, summarise(runs[s], keys)])),
        work_over_base: { cpu: ratio('work', 'base'), main: ratio('work', 'base', 'cpu_main_us_per_req'), rps: ratio('work', 'base', 'rps') },
        ...(targets.floor ? { base_over_floor: ratio('base', 'floor'), work_over_floor: ratio('work', 'floor') } : {}),
        failed: Object.fromEntries(sides.map((s) => [s, runs[s].reduce((n, x) => n + x.failed, 0)])),
        runs,
      };
      log(
        `c=${connections}: CPU µs/req base ${level.base.cpu_us_per_req.median}, work ${level.work.cpu_us_per_req.median}` +
          (level.floor ? `, floor ${level.floor.cpu_us_per_req.median}` : '') +
          `; work/base ${level.work_over_base.cpu.median} (${level.work_over_base.cpu.min}–${level.work_over_base.cpu.max})` +
          (level.floor ? `; base/floor ${level.base_over_floor.median}, work/floor ${level.work_over_floor.median}` : ''),
      );
      report.levels.push(level);
    }

    if (args.stream) report.stream = await streamPairs(args, targets, fake);
    report.rss_mib = Object.fromEntries(['base', 'work'].map((s) => [s, round(procs.rssMiB(targets[s].pid), 1)]));
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
async function streamPairs(args, targets, fake) {
  const direct = { url: fake.url, delay: 'bench-delay', headers: {} };
  const runs = { base: [], work: [] };
  for (let run = 0; run < args.runs; run++) {
    for (const side of run % 2 === 0 ? ['base', 'work'] : ['work', 'base']) {
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
  const out = Object.fromEntries(['base', 'work'].map((s) => [s, summarise(runs[s], ['added_gap_p99', 'added_ttfb_p50'])]));
  log(`stream 32: added gap p99 base ${out.base.added_gap_p99.median} ms, work ${out.work.added_gap_p99.median} ms`);
  return { ...out, runs };
}

async function createDatabase(url, name) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`DROP DATABASE IF EXISTS ${name}`);
    await c.query(`CREATE DATABASE ${name}`);
  } finally {
    await c.end();
  }
}

function render(r) {
  const mm = (s, d = 0) => (s && s.median !== null ? `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})` : '—');
  const out = [`### A/B — ${r.meta.date.slice(0, 16)} · base ${r.meta.base} vs working tree · ${r.meta.store} · ${r.meta.runs} × ${r.meta.seconds_per_run} s per side · load ${r.meta.loadavg_start?.[0]}`, ''];
  out.push('| conns | side | req/s | CPU µs/req | main thread | other threads | over base | over floor |');
  out.push('|---:|---|---:|---:|---:|---:|---:|---:|');
  for (const l of r.levels) {
    for (const side of ['floor', 'base', 'work']) {
      if (!l[side]) continue;
      const s = l[side];
      const overBase = side === 'work' ? mm(l.work_over_base.cpu, 3) : '';
      const overFloor = side === 'floor' ? '' : l[`${side}_over_floor`] ? mm(l[`${side}_over_floor`], 2) : '';
      out.push(`| ${l.connections} | ${side} | ${mm(s.rps)} | ${mm(s.cpu_us_per_req)} | ${mm(s.cpu_main_us_per_req)} | ${mm(s.cpu_other_threads_us_per_req)} | ${overBase} | ${overFloor} |`);
    }
  }
  if (r.stream) out.push('', `Streams (32): added gap p99 base ${mm(r.stream.base.added_gap_p99, 3)} ms, work ${mm(r.stream.work.added_gap_p99, 3)} ms; added TTFB p50 base ${mm(r.stream.base.added_ttfb_p50, 3)}, work ${mm(r.stream.work.added_ttfb_p50, 3)}`);
  if (r.rss_mib) out.push('', `RSS at the end: base ${r.rss_mib.base} MiB, work ${r.rss_mib.work} MiB`);
  return out.join('\n');
}

main().catch((err) => {
  process.stderr.write(`bench:ab failed: ${err.stack ?? err}\n`);
  process.exit(1);
});
