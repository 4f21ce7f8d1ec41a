#!/usr/bin/env node
'use strict';
/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`, e.g. `npm run bench -- --only=chat
 * --cpu-prof=/tmp/prof`): self time by function, self time by group, and inclusive time by group
 * (a sample counts once for every group anywhere on its stack: "time spent under logging").
 *
 *   node bench/profile-summary.js FILE.cpuprofile [--top=40] [--json] [--window=START-END[,START-END…]]
 *
 * --window keeps only the samples taken between two CLOCK_MONOTONIC microsecond stamps (the clock
 * of .cpuprofile timestamps); bench/run.js records each run's window as `window_us` in its report,
 * so start-up and the other side's runs can be left out.
 */
const fs = require('node:fs');

/** Groups by where the code lives; the first match wins. */
const GROUPS = [
  ['(gc)', (f) => f.functionName === '(garbage collector)'],
  ['(idle)', (f) => f.functionName === '(idle)'],
  ['(program)', (f) => f.functionName === '(program)'],
  ['logging: pino', (f) => /node_modules\/(pino|sonic-boom|pino-std-serializers|fast-redact|thread-stream|quick-format-unescaped|atomic-sleep|on-exit-leak-free|safe-stable-stringify)\//.test(f.url)],
  ['axios', (f) => /node_modules\/(axios|follow-redirects|form-data|proxy-from-env|combined-stream|asynckit|mime-types|mime-db|delayed-stream)\//.test(f.url)],
  ['class-transformer/validator', (f) => /node_modules\/(class-transformer|class-validator|validator|libphonenumber-js)\//.test(f.url)],
  ['nest core/common', (f) => /node_modules\/@nestjs\/(core|common)\//.test(f.url)],
  ['nest platform-express + express', (f) => /node_modules\/(@nestjs\/platform-express|express|router|body-parser|raw-body|finalhandler|send|on-finished|path-to-regexp|parseurl|qs|type-is|content-type|accepts|negotiator|encodeurl|escape-html|vary|depd|statuses|http-errors|cookie|fresh|range-parser|proxy-addr|forwarded|ipaddr\.js|merge-descriptors|utils-merge|serve-static|mime|debug|ms|media-typer|setprototypeof|iconv-lite|safer-buffer|bytes|content-disposition|etag|methods|array-flatten|cookie-signature|toidentifier|unpipe|ee-first|inherits|side-channel|object-inspect|get-intrinsic|call-bind|function-bind|has-symbols|gopd|es-errors|hasown|dunder-proto|math-intrinsics|es-object-atoms|get-proto|call-bound|side-channel-.*|once|wrappy|is-promise|router)\//.test(f.url)],
  ['rxjs', (f) => /node_modules\/rxjs\//.test(f.url)],
  ['prom-client', (f) => /node_modules\/(prom-client|tdigest|bintrees)\//.test(f.url)],
  ['store: PGlite', (f) => /node_modules\/@electric-sql\//.test(f.url)],
  ['store: pg/ioredis', (f) => /node_modules\/(pg|pg-protocol|pg-pool|pg-types|ioredis|@ioredis|redis-parser|denque|cluster-key-slot|standard-as-callback)\//.test(f.url)],
  ['eventsource-parser', (f) => /node_modules\/eventsource-parser\//.test(f.url)],
  ['OpenTelemetry SDK', (f) => /node_modules\/@opentelemetry\//.test(f.url)],
  ['other node_modules', (f) => /node_modules\//.test(f.url)],
  ['gateway: logging', (f) => /\/(dist|\.build\/[^/]+\/dist)\/common\/logging\//.test(f.url)],
  ['gateway: common (guards, interceptors, body, errors)', (f) => /\/(dist|\.build\/[^/]+\/dist)\/common\//.test(f.url)],
  ['gateway: chat', (f) => /\/(dist|\.build\/[^/]+\/dist)\/chat\//.test(f.url)],
  ['gateway: routing', (f) => /\/(dist|\.build\/[^/]+\/dist)\/routing\//.test(f.url)],
  ['gateway: providers', (f) => /\/(dist|\.build\/[^/]+\/dist)\/providers\//.test(f.url)],
  ['gateway: tenancy (keys)', (f) => /\/(dist|\.build\/[^/]+\/dist)\/tenancy\//.test(f.url)],
  ['gateway: limits', (f) => /\/(dist|\.build\/[^/]+\/dist)\/limits\//.test(f.url)],
  ['gateway: traces', (f) => /\/(dist|\.build\/[^/]+\/dist)\/traces\//.test(f.url)],
  ['gateway: metrics', (f) => /\/(dist|\.build\/[^/]+\/dist)\/metrics\//.test(f.url)],
  ['gateway: telemetry', (f) => /\/(dist|\.build\/[^/]+\/dist)\/telemetry\//.test(f.url)],
  ['gateway: stores', (f) => /\/(dist|\.build\/[^/]+\/dist)\/stores\//.test(f.url)],
  ['gateway: other', (f) => /\/(dist|\.build\/[^/]+\/dist)\//.test(f.url)],
  ['node: http', (f) => /^node:(_http_|http$|https$|internal\/http)/.test(f.url)],
  ['node: net/streams/buffers', (f) => /^node:(net|stream|_stream|internal\/streams|buffer|internal\/buffer|string_decoder|internal\/stream_base_commons|internal\/net)/.test(f.url)],
  ['node: crypto', (f) => /^node:(crypto|internal\/crypto)/.test(f.url)],
  ['node: timers/events/async hooks', (f) => /^node:(timers|internal\/timers|events|internal\/event_target|internal\/abort_controller|internal\/async_hooks|async_hooks|internal\/process\/task_queues|internal\/process\/promises)/.test(f.url)],
  ['node: fs (log writes)', (f) => /^node:(fs|internal\/fs)/.test(f.url)],
  ['node: other', (f) => /^node:/.test(f.url)],
  ['JSON (builtin)', (f) => f.url === '' && /^(parse|stringify|JSONParse|JSONStringify)$/.test(f.functionName)],
  ['builtins (native)', (f) => f.url === ''],
  ['other', () => true],
];

function groupOf(frame) {
  for (const [name, test] of GROUPS) if (test(frame)) return name;
  return 'other';
}

/** A frame as `name  file:line`, the path cut to the package or to the gateway's own `gateway/…`. */
function frameName(f) {
  const short = f.url.replace(/^.*node_modules\//, '').replace(/^.*\/(dist|\.build\/[^/]+\/dist)\//, 'gateway/');
  return `${f.functionName || '(anonymous)'}  ${short}${f.url ? `:${f.lineNumber + 1}` : ''}`;
}

function summarise(profile, top = 40, windows = null) {
  const byId = new Map();
  const parent = new Map();
  for (const n of profile.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const self = new Map();
  const fnSelf = new Map();
  const groupSelf = new Map();
  const groupIncl = new Map();
  const fnIncl = new Map();
  let total = 0;
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
  const { samples, timeDeltas } = profile;
  let t = profile.startTime;
  let kept = 0;
  for (let i = 0; i < samples.length; i++) {
    t += timeDeltas[i];
    const dt = timeDeltas[i + 1] ?? 0;
    if (windows && !windows.some(([a, b]) => t >= a && t <= b)) continue;
    kept++;
    const id = samples[i];
    const node = byId.get(id);
    if (!node) continue;
    total += dt;
    add(self, id, dt);
    const f = node.callFrame;
    add(fnSelf, frameName(f), dt);
    add(groupSelf, groupOf(f), dt);
    const seen = new Set();
    const seenFn = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = byId.get(cur).callFrame;
      const g = groupOf(cf);
      if (!seen.has(g)) {
        seen.add(g);
        add(groupIncl, g, dt);
      }
      // Only the gateway's own functions: "what does this step cost with everything it calls".
      if (/\/(dist|\.build\/[^/]+\/dist)\//.test(cf.url)) {
        const name = frameName(cf);
        if (!seenFn.has(name)) {
          seenFn.add(name);
          add(fnIncl, name, dt);
        }
      }
    }
  }
  const idle = groupSelf.get('(idle)') ?? 0;
  const busy = total - idle;
  const rows = (m) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => ({ name: k, ms: Math.round(v / 1000), pct_of_busy: Math.round((v / busy) * 1000) / 10 }));
  return {
    total_ms: Math.round(total / 1000),
    busy_ms: Math.round(busy / 1000),
    samples: kept,
    profile_us: [profile.startTime, profile.endTime],
    self_by_group: rows(groupSelf),
    inclusive_by_group: rows(groupIncl).filter((r) => !r.name.startsWith('(')),
    self_by_function: rows(fnSelf).slice(0, top),
    inclusive_by_gateway_function: rows(fnIncl).slice(0, top),
  };
}

function renderSummary(s, top) {
  const table = (title, rows) =>
    `\n${title}\n\n| | ms | % of busy |\n|---|---:|---:|\n` + rows.map((r) => `| ${r.name} | ${r.ms} | ${r.pct_of_busy} |`).join('\n') + '\n';
  return (
    `profile: ${s.samples} samples, ${s.total_ms} ms, busy (not idle) ${s.busy_ms} ms\n` +
    table('Self time by group', s.self_by_group) +
    table('Inclusive time by group (a sample counts for every group on its stack)', s.inclusive_by_group) +
    table(`Self time, top ${top} functions`, s.self_by_function) +
    table(`Inclusive time of the gateway's own functions, top ${top}`, s.inclusive_by_gateway_function ?? [])
  );
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  if (!file) {
    process.stderr.write('usage: node bench/profile-summary.js FILE.cpuprofile [--top=40] [--json]\n');
    process.exit(2);
  }
  const top = Number((args.find((a) => a.startsWith('--top=')) ?? '--top=40').slice(6));
  const w = args.find((a) => a.startsWith('--window='));
  const windows = w ? w.slice(9).split(',').map((x) => x.split('-').map(Number)) : null;
  const s = summarise(JSON.parse(fs.readFileSync(file, 'utf8')), top, windows);
  if (args.includes('--json')) {
    process.stdout.write(JSON.stringify(s, null, 2) + '\n');
  } else {
    process.stdout.write(renderSummary(s, top));
  }
}

module.exports = { summarise, renderSummary, groupOf };
