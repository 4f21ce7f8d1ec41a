#!/usr/bin/env node
'use strict';
/**
 * `npm run fuzz [-- options]`: hostile input against a running gateway. Builds the working tree and
 * starts its own gateway (embedded default, a generated gateway.yaml whose providers are the bench's
 * fake upstream and the offline mock), or takes --url and --key of one already running. Sends
 * generated requests to every endpoint (bench/lib/fuzz-cases.js: each field a plausible value or
 * junk, random headers and query strings), then raw-socket cases no HTTP client would send.
 *
 * Pass: no 5xx; every 4xx the app answers carries the error envelope
 * {"error":{"type":"error","code":"…","message":"…"}} (embeddings' model_not_found keeps OpenAI's
 * own body, as the contract says); every 2xx has the endpoint's shape (a Responses stream: numbered
 * `event:`/`data:` frames from response.created to response.completed or response.incomplete);
 * no request without an answer;
 * the slow-loris socket is closed by the server; the gateway answers GET /health with 200 afterwards.
 * Node's own 4xx for a request it cannot parse (empty body, `Connection: close`) is a pass: it never
 * reaches the app. Exit code 1 on any failure.
 *
 * Options:
 *   --cases=N          generated requests per endpoint (default 100000; --quick 60)
 *   --quick            few cases and the short raw-socket set (the smoke test in the suite)
 *   --url=URL --key=K  fuzz a running gateway instead of starting one (RSS then from its /metrics)
 *   --concurrency=N    requests in flight (default 8)
 *   --seed=N           fast-check seed (default: random, printed and written to the report)
 *   --only=a,b         endpoints (chat, chat_stream, embeddings, explain, feedback, experiments_create,
 *                      experiments_list, experiments_rollback, health, metrics, responses,
 *                      responses_stream, models, models_retrieve, raw)
 *   --out=FILE         where to write the JSON (default bench/results/fuzz-latest.json)
 */
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const fc = require('fast-check');
const procs = require('./lib/procs');
const { arbitraries, rawCases } = require('./lib/fuzz-cases');

const KEY = 'gw-fuzz-key';
// New endpoints go at the end: an endpoint's index is part of its batches' seeds, so appending keeps
// the others' replays.
const ENDPOINTS = [
  'chat', 'chat_stream', 'embeddings', 'explain', 'feedback', 'experiments_create', 'experiments_list', 'experiments_rollback', 'health', 'metrics',
  'responses', 'responses_stream', 'models', 'models_retrieve',
];
const BATCH = 500;
const log = (msg) => process.stderr.write(`[fuzz ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

function parseArgs(argv) {
  const a = { quick: false, cases: null, url: null, key: null, concurrency: 8, seed: null, only: null, out: null };
  for (let i = 0; i < argv.length; i++) {
    let [k, v] = argv[i].split(/=(.*)/s, 2);
    const value = () => v ?? argv[++i];
    switch (k) {
      case '--quick': a.quick = true; break;
      case '--cases': a.cases = Number(value()); break;
      case '--url': a.url = value().replace(/\/$/, ''); break;
      case '--key': a.key = value(); break;
      case '--concurrency': a.concurrency = Number(value()); break;
      case '--seed': a.seed = Number(value()); break;
      case '--only': a.only = value().split(',').map((s) => s.trim()).filter(Boolean); break;
      case '--out': a.out = value(); break;
      default: throw new Error(`unknown option ${argv[i]}`);
    }
  }
  if (a.url && !a.key) throw new Error('--url needs --key');
  a.cases ??= a.quick ? 60 : 100_000;
  if (!Number.isInteger(a.cases) || a.cases < 1) throw new Error('--cases must be a positive integer');
  a.seed ??= Math.floor(Math.random() * 2 ** 31);
  return a;
}

function gatewayYaml(fakeUrl) {
  return [
    '# Written by bench/fuzz.js: the bench fake upstream (OpenAI-compatible) and the offline mock.',
    'providers:',
    `  fake: { family: openai, base_url: "${fakeUrl}/v1", api_key: "x" }`,
    '  mock: { family: mock }',
    'models:',
    '  bench: { provider: fake, upstream: bench-model, cost: { input_per_mtok: 0.15, output_per_mtok: 0.6 } }',
    '  fake-embed: { provider: fake, upstream: bench-embed, type: embedding }',
    '  mock-fast: { provider: mock, type: chat, cost: { input_per_mtok: 0.1, output_per_mtok: 0.2 } }',
    '  mock-embed: { provider: mock, type: embedding, dimensions: 8 }',
    'routes:',
    '  - { name: default, models: [auto], strategy: ordered, targets: [fake/bench, mock/mock-fast] }',
    '  - { name: learn, models: [learn], strategy: feedback_driven, targets: [fake/bench, mock/mock-fast] }',
    '  - { name: cheap, models: [cheap], strategy: smart_cost, targets: [fake/bench, mock/mock-fast] }',
    '  - { name: support, models: [support], targets: [mock/mock-fast], template: support }',
    'templates:',
    '  support: { system: "You help {{customer}}." }',
    'firewall: { rules: [ { id: no-secrets, pattern: "api[_-]?key\\\\s*[:=]", action: block } ] }',
    'limits: { requests_per_minute_per_key: 100000000, experiment_creates_per_hour: 100000000, explain_per_minute_per_org: 100000000, explain_per_minute_per_key: 100000000 }',
    'organizations:',
    `  fuzz: { plan: pro, features: [has_test_ab, feedback_routing, explain], api_keys: [ { id: fuzz, key: "${KEY}" } ] }`,
    '',
  ].join('\n');
}

// ---- answers ------------------------------------------------------------------------------

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function envelopeOk(json) {
  const e = json?.error;
  if (!isObj(e) || typeof e.code !== 'string' || typeof e.message !== 'string' || !e.code || !e.message) return false;
  if (e.type === 'invalid_request_error' && e.code === 'model_not_found' && e.param === 'model') return true;
  return e.type === 'error';
}

const isModel = (m) => isObj(m) && m.object === 'model' && typeof m.id === 'string' && m.id !== '' && typeof m.owned_by === 'string' && typeof m.created === 'number';
const isResponse = (r) => isObj(r) && r.object === 'response' && /^resp_/.test(r.id) && Array.isArray(r.output) && typeof r.status === 'string' && typeof r.model === 'string';

/**
 * A Responses event stream: `event: <type>` + `data: {…}` frames whose data repeats the type and
 * numbers them from 0, opened by response.created and closed by response.completed or
 * response.incomplete carrying the whole Response. response.failed (an upstream failing after the
 * first output) is not a pass here: the fuzz gateway's upstreams do not fail mid-stream.
 */
function responsesStreamOk(text) {
  if (!text.endsWith('\n\n')) return false;
  const frames = text.slice(0, -2).split('\n\n');
  const types = [];
  for (const [i, frame] of frames.entries()) {
    const lines = frame.split('\n');
    if (lines.length !== 2 || !lines[0].startsWith('event: ') || !lines[1].startsWith('data: ')) return false;
    const type = lines[0].slice(7);
    const d = JSON.parse(lines[1].slice(6));
    if (d.type !== type || d.sequence_number !== i) return false;
    types.push(type);
    if (i === frames.length - 1 && !isResponse(d.response)) return false;
  }
  return types[0] === 'response.created' && ['response.completed', 'response.incomplete'].includes(types[types.length - 1]);
}

function shapeOk(endpoint, text, contentType) {
  let j;
  if (endpoint === 'metrics') return text.includes('# TYPE');
  if (contentType.startsWith('text/event-stream')) {
    if (endpoint === 'responses' || endpoint === 'responses_stream') return responsesStreamOk(text);
    if (endpoint !== 'chat' && endpoint !== 'chat_stream') return false;
    if (!text.endsWith('data: [DONE]\n\n')) return false;
    for (const line of text.split('\n')) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const c = JSON.parse(line.slice(6));
      if (c.error || c.object !== 'chat.completion.chunk' || !Array.isArray(c.choices)) return false;
    }
    return true;
  }
  try {
    j = JSON.parse(text);
  } catch {
    return false;
  }
  switch (endpoint) {
    case 'chat':
    case 'chat_stream':
      return j?.object === 'chat.completion' && Array.isArray(j.choices) && typeof j.model === 'string';
    case 'embeddings':
      return j?.object === 'list' && Array.isArray(j.data) && j.data.length > 0;
    case 'explain':
      return j?.dry_run === true && Array.isArray(j.candidates) && 'would_select' in j;
    case 'feedback':
      return isObj(j) && Object.keys(j).length === 0;
    case 'experiments_list':
      return Array.isArray(j);
    case 'experiments_create':
    case 'experiments_rollback':
      return isObj(j) && typeof j.id === 'string' && typeof j.status === 'string';
    case 'health':
      return isObj(j);
    case 'responses':
    case 'responses_stream':
      return isResponse(j) && ['completed', 'incomplete'].includes(j.status) && j.error === null;
    case 'models':
      return isObj(j) && j.object === 'list' && Array.isArray(j.data) && j.data.length > 0 && j.data.every(isModel);
    case 'models_retrieve':
      return isModel(j);
    default:
      return false;
  }
}

/** One request over the keep-alive agent; resolves with status, content type and body text (never rejects). */
function send(agent, base, r) {
  return new Promise((resolve) => {
    const u = new URL(base);
    const body = r.body === undefined ? undefined : Buffer.from(r.body, 'utf8');
    const headers = { ...r.headers };
    if (body) headers['content-length'] = String(body.length);
    let req;
    try {
      req = http.request({ host: u.hostname, port: u.port, method: r.method, path: r.path, headers, agent, timeout: 60_000 }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => resolve({ error: `response: ${err.code ?? err.message}` }));
      });
    } catch (err) {
      // The client refused to build the request (a header value Node's client will not send): not a case.
      resolve({ skipped: err.code ?? err.message });
      return;
    }
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ error: err.code ?? err.message }));
    req.end(body);
  });
}

function newStats() {
  return { cases: 0, statuses: {}, fivexx: 0, non_envelope_4xx: 0, bad_2xx: 0, errors: 0, skipped: 0, seconds: 0, rps: 0, failures: [] };
}

function record(stats, endpoint, req, res) {
  if (res.skipped) {
    stats.skipped++;
    return;
  }
  stats.cases++;
  const fail = (what) => {
    if (stats.failures.length < 10) stats.failures.push({ what, request: { ...req, body: req.body?.slice(0, 500) }, answer: res.text?.slice(0, 300) });
  };
  if (res.error) {
    stats.errors++;
    return fail(`no answer: ${res.error}`);
  }
  stats.statuses[res.status] = (stats.statuses[res.status] ?? 0) + 1;
  if (res.status >= 500) {
    stats.fivexx++;
    return fail(`status ${res.status}`);
  }
  if (res.status >= 400) {
    let json;
    try {
      json = JSON.parse(res.text);
    } catch {
      json = undefined;
    }
    if (!envelopeOk(json)) {
      stats.non_envelope_4xx++;
      fail(`${res.status} without the error envelope`);
    }
    return;
  }
  let ok;
  try {
    ok = shapeOk(endpoint, res.text, res.contentType);
  } catch {
    ok = false;
  }
  if (!ok) {
    stats.bad_2xx++;
    fail(`${res.status} without the endpoint's shape`);
  }
}

async function fuzzEndpoint(base, agent, endpoint, arb, args) {
  const stats = newStats();
  const started = Date.now();
  let next = 0;
  let batch = [];
  let batchStart = 0;
  let batchNo = 0;
  const take = () => {
    if (next >= args.cases) return null;
    if (next - batchStart >= batch.length) {
      batchStart = next;
      // One seed per (endpoint, batch): a failure's batch replays with --seed and --only.
      batch = fc.sample(arb, { numRuns: Math.min(BATCH, args.cases - next), seed: args.seed + ENDPOINTS.indexOf(endpoint) * 1_000_003 + batchNo++ });
    }
    return batch[next++ - batchStart];
  };
  let lastLog = Date.now();
  const worker = async () => {
    for (let r = take(); r; r = take()) {
      record(stats, endpoint, r, await send(agent, base, r));
      if (Date.now() - lastLog > 30_000) {
        lastLog = Date.now();
        log(`  ${endpoint}: ${next}/${args.cases}`);
      }
    }
  };
  await Promise.all(Array.from({ length: args.concurrency }, worker));
  stats.seconds = (Date.now() - started) / 1000;
  stats.rps = Math.round(stats.cases / stats.seconds);
  return stats;
}

// ---- raw sockets --------------------------------------------------------------------------

/** Parses the HTTP/1.x answers in `buf` (Content-Length, chunked, or to the end when the server closed). */
function parseResponses(buf) {
  const out = [];
  let s = buf.toString('latin1');
  while (s.startsWith('HTTP/1.')) {
    const end = s.indexOf('\r\n\r\n');
    if (end < 0) break;
    const head = s.slice(0, end).split('\r\n');
    const status = Number(head[0].split(' ')[1]);
    const headers = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let rest = s.slice(end + 4);
    let body = '';
    if (status === 100) {
      s = rest;
      continue;
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      body = rest.slice(0, n);
      rest = rest.slice(n);
    } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      for (;;) {
        const nl = rest.indexOf('\r\n');
        if (nl < 0) break;
        const n = parseInt(rest.slice(0, nl), 16);
        rest = rest.slice(nl + 2);
        if (!n) {
          rest = rest.slice(rest.indexOf('\r\n') + 2);
          break;
        }
        body += rest.slice(0, n);
        rest = rest.slice(n + 2);
      }
    } else {
      body = rest;
      rest = '';
    }
    out.push({ status, headers, body: Buffer.from(body, 'latin1').toString('utf8') });
    s = rest;
  }
  return out;
}

function rawExchange(base, c) {
  const u = new URL(base);
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks = [];
    let error = null;
    let closedAt = null;
    let timer = null;
    let drip = null;
    const sock = net.connect(Number(u.port), u.hostname);
    const finish = () => {
      clearTimeout(timer);
      clearInterval(drip);
      sock.destroy();
      resolve({ buf: Buffer.concat(chunks), error, closedMs: closedAt === null ? null : closedAt - started });
    };
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', (err) => (error = err.code ?? err.message));
    sock.on('close', () => {
      closedAt = Date.now();
      finish();
    });
    sock.on('connect', () => {
      if (c.slow) {
        let i = 0;
        drip = setInterval(() => {
          if (sock.destroyed) return clearInterval(drip);
          if (i < c.bytes.length) sock.write(c.bytes.subarray(i, ++i));
        }, c.slow);
      } else {
        sock.write(c.bytes);
        if (c.endAfterWrite) sock.end();
      }
    });
    timer = setTimeout(finish, c.waitMs);
  });
}

/** A raw case's verdict: each answer below 500, each 4xx the envelope or Node's own, and the case's expectation. */
function judgeRaw(c, x) {
  const answers = parseResponses(x.buf);
  const problems = [];
  const origins = [];
  for (const a of answers) {
    if (a.status >= 500) problems.push(`status ${a.status}`);
    if (a.status >= 400 && a.status < 500) {
      let json;
      try {
        json = JSON.parse(a.body);
      } catch {
        json = undefined;
      }
      if (envelopeOk(json)) origins.push(`${a.status} app`);
      else if (a.body === '' && !a.headers['content-type']) origins.push(`${a.status} node`);
      else problems.push(`${a.status} without the error envelope: ${a.body.slice(0, 200)}`);
    } else origins.push(String(a.status));
  }
  if (x.buf.length > 0 && answers.length === 0) problems.push(`unparseable answer: ${x.buf.toString('latin1').slice(0, 200)}`);
  if (c.expect === 'closed' && x.closedMs === null) problems.push(`the server held the socket for ${c.waitMs} ms`);
  if (typeof c.expect === 'number' && answers.length !== c.expect) problems.push(`${answers.length} answers, expected ${c.expect}`);
  return { name: c.name, answers: origins, closed_ms: x.closedMs, socket_error: x.error, ok: problems.length === 0, problems };
}

// ---- process ------------------------------------------------------------------------------

async function metricsRss(base) {
  try {
    const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    const m = /^gateway_process_resident_memory_bytes ([0-9.eE+]+)$/m.exec(text);
    return m ? Math.round((Number(m[1]) / 2 ** 20) * 10) / 10 : null;
  } catch {
    return null;
  }
}

function table(results) {
  const lines = ['| endpoint | cases | statuses | 5xx | non-envelope 4xx | bad 2xx | no answer | req/s |', '|---|---:|---|---:|---:|---:|---:|---:|'];
  for (const [name, s] of Object.entries(results)) {
    const statuses = Object.entries(s.statuses).map(([k, n]) => `${k}: ${n}`).join(', ');
    lines.push(`| ${name} | ${s.cases} | ${statuses} | ${s.fivexx} | ${s.non_envelope_4xx} | ${s.bad_2xx} | ${s.errors} | ${s.rps} |`);
  }
  return lines.join('\n');
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const want = (s) => !args.only || args.only.includes(s);
  const outFile = args.out ?? path.join(procs.ROOT, 'bench', 'results', 'fuzz-latest.json');
  const started = Date.now();
  const cleanups = procs.cleanupStack(log);
  const stopAll = cleanups.run;
  let gw = null;
  let exitCode = 1;
  try {
    let base = args.url;
    let key = args.key;
    if (!base) {
      log('building the gateway (nest build)…');
      const build = procs.buildGateway(`fuzz-${process.pid}`);
      cleanups.push(() => build.remove());
      const fake = await procs.startFake({});
      cleanups.push(() => fake.stop());
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-fuzz-'));
      cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
      const env = procs.gatewayEnv({ tmp, port: await require('../scripts/test-servers').freePort(), config: path.join(tmp, 'gateway.yaml'), dataDir: path.join(tmp, 'data') });
      fs.writeFileSync(env.GATEWAY_CONFIG, gatewayYaml(fake.url));
      gw = await procs.startGateway({ main: build.main, env, port: Number(env.PORT), logFile: path.join(tmp, 'gateway.log') });
      cleanups.push(() => gw.stop());
      base = gw.url;
      key = KEY;
      log(`gateway on ${base} (pid ${gw.pid}), fake upstream on ${fake.url}`);
    }
    const rss = () => (gw ? Math.round(procs.rssMiB(gw.pid) * 10) / 10 : metricsRss(base));
    const report = {
      meta: {
        date: new Date().toISOString(),
        command: `npm run fuzz -- ${process.argv.slice(2).join(' ')}`.trim(),
        node: process.version,
        cores: os.cpus().length,
        fast_check: require('fast-check/package.json').version,
        mode: args.quick ? 'quick' : 'full',
        target: args.url ? 'external' : 'own gateway (embedded default)',
        seed: args.seed,
        cases_per_endpoint: args.cases,
        concurrency: args.concurrency,
      },
      rss_before_mib: await rss(),
      endpoints: {},
      raw: [],
    };
    log(`seed ${args.seed}, ${args.cases} cases per endpoint, RSS ${report.rss_before_mib} MiB`);

    const agent = new http.Agent({ keepAlive: true, maxSockets: args.concurrency });
    // The slow-loris case runs beside the generated traffic: it takes the server's header timeout to end.
    const raws = rawCases(key);
    const loris = want('raw') ? Promise.all(raws.filter((c) => c.slow).map((c) => rawExchange(base, c).then((x) => judgeRaw(c, x)))) : Promise.resolve([]);
    const arbs = arbitraries({
      key,
      chatModels: args.url ? ['auto'] : ['auto', 'learn', 'cheap', 'support', 'bench', 'fake/bench', 'mock-fast', 'mock/mock-fast', 'bench,mock-fast', 'mock-embed'],
      embeddingModels: args.url ? [] : ['fake-embed', 'mock-embed', 'mock/mock-embed'],
      pairs: args.url ? [{ provider: 'mock', model: 'mock-fast' }] : [{ provider: 'fake', model: 'bench' }, { provider: 'mock', model: 'mock-fast' }, { provider: 'mock', model: 'mock-embed' }],
    });
    for (const endpoint of ENDPOINTS.filter(want)) {
      log(`${endpoint}: ${args.cases} cases…`);
      const s = await fuzzEndpoint(base, agent, endpoint, arbs[endpoint], args);
      report.endpoints[endpoint] = s;
      log(`  ${endpoint}: ${s.cases} in ${s.seconds.toFixed(1)} s (${s.rps} req/s), 5xx ${s.fivexx}, non-envelope 4xx ${s.non_envelope_4xx}, bad 2xx ${s.bad_2xx}, no answer ${s.errors}`);
    }
    agent.destroy();
    if (want('raw')) {
      for (const c of raws.filter((x) => !x.slow)) report.raw.push(judgeRaw(c, await rawExchange(base, c)));
      report.raw.push(...(await loris));
    }

    const live = await fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) }).then((r) => r.status, (e) => `error ${e.message}`);
    report.health_after = live;
    report.rss_after_mib = await rss();
    report.duration_s = Math.round((Date.now() - started) / 1000);
    const failures = [];
    for (const [name, s] of Object.entries(report.endpoints)) {
      if (s.fivexx || s.non_envelope_4xx || s.bad_2xx || s.errors) failures.push(`${name}: 5xx ${s.fivexx}, non-envelope 4xx ${s.non_envelope_4xx}, bad 2xx ${s.bad_2xx}, no answer ${s.errors}`);
    }
    for (const r of report.raw) if (!r.ok) failures.push(`raw "${r.name}": ${r.problems.join('; ')}`);
    if (live !== 200) failures.push(`GET /health after the run: ${live}`);
    report.pass = failures.length === 0;
    report.failures = failures;

    fs.mkdirSync(path.dirname(outFile), { recursive: true });
    fs.writeFileSync(outFile, JSON.stringify(report, null, 2) + '\n');
    const rawLines = ['| raw case | answers | closed after ms | verdict |', '|---|---|---:|---|'];
    for (const r of report.raw) rawLines.push(`| ${r.name} | ${r.answers.join(', ') || '(none)'} | ${r.closed_ms ?? '—'} | ${r.ok ? 'pass' : r.problems.join('; ')} |`);
    process.stdout.write(
      [
        `**Fuzz** (${report.meta.mode}, seed ${args.seed}, ${args.cases} cases per endpoint, ${args.concurrency} in flight, Node ${process.version}, ${report.meta.cores} cores)`,
        '',
        table(report.endpoints),
        '',
        rawLines.join('\n'),
        '',
        `GET /health after: ${live}; RSS ${report.rss_before_mib} → ${report.rss_after_mib} MiB; ${report.duration_s} s; ${report.pass ? 'PASS' : 'FAIL'}`,
        ...failures.map((f) => `  - ${f}`),
        '',
      ].join('\n'),
    );
    if (!report.pass) {
      for (const s of Object.values(report.endpoints)) for (const f of s.failures.slice(0, 3)) log(`example: ${f.what}: ${JSON.stringify(f.request).slice(0, 600)} → ${f.answer ?? ''}`);
    }
    log(`report written to ${path.relative(process.cwd(), outFile)}`);
    exitCode = report.pass ? 0 : 1;
  } catch (err) {
    log(`failed: ${err.stack ?? err}`);
    exitCode = 1;
  } finally {
    await stopAll();
  }
  process.exit(exitCode);
}

main();
