#!/usr/bin/env node
'use strict';
/**
 * `npm run bench:floor`: what the performance budget (docs/architecture.md "Performance budget") is
 * measured against on this machine. The same non-streaming load as `npm run bench`'s chat section (autocannon, warm-up, 32 connections, the
 * median of 3 runs) against the fake upstream directly and through two reference proxies that do the
 * least a Node.js gateway must (bench/lib/floor-proxy.js: parse the body, call the upstream over
 * keep-alive, parse and re-serialise the answer), on plain node:http, as an Express route and as a
 * NestJS controller on Express (what the framework the gateway is built on costs by itself). Prints
 * req/s and CPU µs per request of the serving process; writes bench/results/floor.json.
 *
 *   npm run bench:floor [-- --seconds=8 --runs=3 --connections=32]
 */
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const procs = require('./lib/procs');
const { runLoad } = require('./lib/load');
const { round, summarise } = require('./lib/stats');

const arg = (name, dflt) => Number((process.argv.find((a) => a.startsWith(`--${name}=`)) ?? '').split('=')[1] ?? dflt) || dflt;
const SECONDS = arg('seconds', 8);
const RUNS = arg('runs', 3);
const CONNECTIONS = arg('connections', 32);
const BODY = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say something short about benchmarks, please.' }], max_tokens: 200 });

async function measure(url, pid) {
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const c0 = procs.cpuSeconds(pid);
    const r = await runLoad({ url: `${url}/v1/chat/completions`, connections: CONNECTIONS, seconds: SECONDS, body: BODY });
    const cpu = procs.cpuSeconds(pid) - c0;
    runs.push({ rps: r.rps, p50: r.p50, p99: r.p99, cpu_us_per_request: round((cpu * 1e6) / Math.max(1, r.ok), 0), errors: r.errors + r.non2xx });
  }
  const s = summarise(runs, ['rps', 'p50', 'p99', 'cpu_us_per_request']);
  return { rps: s.rps.median, p50: s.p50.median, p99: s.p99.median, cpu_us_per_request: s.cpu_us_per_request.median, runs };
}

(async () => {
  const fake = await procs.startFake({ host: '127.0.0.1', port: 0, chunks: 20, delayMs: 10, slowMs: 1000, slowChunks: 600 });
  const out = { date: new Date().toISOString(), node: process.version, cores: os.cpus().length, cpu: os.cpus()[0]?.model, connections: CONNECTIONS, seconds: SECONDS, runs: RUNS, results: {} };
  try {
    await runLoad({ url: `${fake.url}/v1/chat/completions`, connections: CONNECTIONS, seconds: 2, body: BODY });
    out.results.direct = await measure(fake.url, fake.pid);
    for (const kind of ['node', 'express', 'nest']) {
      const p = await procs.startFloorProxy(kind, fake.port);
      try {
        await runLoad({ url: `${p.url}/v1/chat/completions`, connections: CONNECTIONS, seconds: 3, body: BODY });
        out.results[`${kind}-proxy`] = await measure(p.url, p.pid);
      } finally {
        await p.stop();
      }
    }
  } finally {
    await fake.stop();
  }
  const lines = ['', `### Reference floor — ${out.date.slice(0, 10)} (${CONNECTIONS} connections, median of ${RUNS} × ${SECONDS} s; Node ${out.node}, ${out.cores} cores)`, '', '| target | req/s | p50 ms | p99 ms | CPU µs/req of the serving process |', '|---|---:|---:|---:|---:|'];
  for (const [k, v] of Object.entries(out.results)) lines.push(`| ${k === 'direct' ? 'fake upstream, direct' : `${k} (bench/lib/floor-proxy.js)`} | ${v.rps} | ${v.p50} | ${v.p99} | ${v.cpu_us_per_request} |`);
  process.stdout.write(lines.join('\n') + '\n');
  fs.mkdirSync(path.join(__dirname, 'results'), { recursive: true });
  fs.writeFileSync(path.join(__dirname, 'results', 'floor.json'), JSON.stringify(out, null, 2) + '\n');
})().catch((err) => {
  process.stderr.write(`bench:floor: ${err.stack ?? err}\n`);
  process.exit(1);
});
