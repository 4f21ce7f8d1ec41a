#!/usr/bin/env node
'use strict';
/**
 * `npm run soak:chaos [-- options]`: the gateway under store and replica faults. Starts throwaway
 * Postgres 15 and Redis on loopback (scripts/test-servers.js), builds the working tree, starts the
 * bench's fake upstream and two gateway replicas on the same stores, drives steady mixed traffic at
 * a fixed rate round-robin over the replicas, and injects faults on a schedule with a quiet
 * (`recovery`) phase between each:
 *
 *   baseline → redis-frozen (SIGSTOP … SIGCONT) → recovery → redis-killed (SIGKILL, restarted on the
 *   same port) → recovery → postgres-down (`pg_ctl stop -m immediate`, started again on the same
 *   port and data dir) → recovery → replica-restart (replica B out of rotation, SIGTERM, started
 *   again, back in rotation) → recovery
 *
 * Every request carries its own `x-request-id` and is tagged with the phase it started in. After the
 * traffic stops and the replicas' trace buffers are empty, it reads Postgres directly: decision
 * traces lost (a 2xx chat or embeddings answer without a row) or duplicated (more than one row),
 * and whether an experiments write that failed changed anything. It prints Markdown tables, writes
 * bench/results/chaos-latest.json, and exits 1 when a pass criterion fails (2 on a harness error).
 *
 * Options (`--name=value` or `--name value`):
 *   --minutes=N          length of the run (default 10); --seconds=N for short runs
 *   --rate=N             requests per second in total, both replicas (default 40)
 *   --baseline=S         seconds of baseline before the first fault (default 10 % of the run, ≤ 60)
 *   --redis-freeze=S     seconds Redis stays frozen (default 6)
 *   --redis-dead=S       seconds Redis stays dead before it is started again (default 10)
 *   --pg-down=S          seconds Postgres stays down (default 60; runs under 5 minutes: 15 % of the run)
 *   --explain-every=S    one routing explain every S seconds (default 10: 6 per minute, under the key's 10)
 *   --experiments-every=S one experiments call every S seconds: create, list, rollback, … (default 30)
 *   --timeout=S          client timeout of one request (default 20)
 *   --drain=S            at most this long to wait for the trace buffers after the traffic (default 120)
 *   --out=FILE           where to write the JSON (default bench/results/chaos-latest.json)
 *   --keep-build         keep bench/.build/chaos-<pid>/
 *   --keep-logs          keep the gateways' logs and the servers' folders (their path is printed)
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const procs = require('./lib/procs');
const { percentiles, round } = require('./lib/stats');
const servers = require('../scripts/test-servers');

const ORG = 'chaos';
const KEY = 'gw-chaos-key';
const EXPLAIN_KEY = 'gw-chaos-explain-key';
const MIX = ['chat', 'stream', 'chat', 'embeddings', 'feedback', 'chat', 'stream', 'embeddings', 'chat', 'feedback'];
const SERVED = ['chat', 'stream', 'embeddings'];
const RSS_BUDGET_MIB = 30;
/** Seconds after Postgres is back during which its documented 503s still count as the outage's (see postgres-back). */
const PG_BACK_S = 3;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const log = (msg) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)} +${((Date.now() - started) / 1000).toFixed(0)}s] ${msg}\n`);

function parseArgs(argv) {
  const a = { minutes: 10, seconds: null, rate: 40, baseline: null, redisFreeze: 6, redisDead: 10, pgDown: null, explainEvery: 10, experimentsEvery: 30, timeout: 20, drain: 120, out: null, keepBuild: false, keepLogs: false };
  const names = { minutes: 'minutes', seconds: 'seconds', rate: 'rate', baseline: 'baseline', 'redis-freeze': 'redisFreeze', 'redis-dead': 'redisDead', 'pg-down': 'pgDown', 'explain-every': 'explainEvery', 'experiments-every': 'experimentsEvery', timeout: 'timeout', drain: 'drain' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(fs.readFileSync(__filename, 'utf8').split('*/')[0].replace(/^#!.*\n'use strict';\n\/\*\*\n/, '').replace(/^ \* ?/gm, '') + '\n');
      process.exit(0);
    }
    if (arg === '--keep-build') { a.keepBuild = true; continue; }
    if (arg === '--keep-logs') { a.keepLogs = true; continue; }
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (!m) throw new Error(`unknown argument ${arg} (see --help)`);
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new Error(`${arg}: missing value`);
    if (m[1] === 'out') { a.out = path.resolve(value); continue; }
    const key = names[m[1]];
    if (!key) throw new Error(`unknown option --${m[1]} (see --help)`);
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${m[1]}: not a number: ${value}`);
    a[key] = n;
  }
  if (a.rate <= 0 || a.rate > 1000) throw new Error('--rate: 0 < rate ≤ 1000');
  return a;
}

/** The fault schedule: phase lengths in seconds; the four quiet phases share what the faults leave. */
function schedule(a) {
  const total = a.seconds ?? a.minutes * 60;
  const baseline = a.baseline ?? Math.min(60, Math.max(3, Math.round(total * 0.1)));
  const pgDown = a.pgDown ?? (total >= 300 ? 60 : Math.max(5, Math.round(total * 0.15)));
  // The replica restart takes its own time (drain, start-up): counted as ~10 s here.
  const faults = a.redisFreeze + a.redisDead + pgDown + 10;
  const quiet = Math.max(3, (total - baseline - faults) / 4);
  return { total, baseline, redisFreeze: a.redisFreeze, redisDead: a.redisDead, pgDown, quiet, warmup: Math.min(5, Math.max(1, total / 30)) };
}

function gatewayYaml(fakeUrl) {
  return [
    '# Written by bench/chaos.js: one OpenAI-family provider at the bench fake, a learning route, an org with explain and experiments.',
    'providers:',
    `  fake: { family: openai, base_url: "${fakeUrl}/v1", api_key: "x" }`,
    'models:',
    '  chat-a: { provider: fake, upstream: chaos-a, type: chat, quality: 0.7, cost: { input_per_mtok: 0.15, output_per_mtok: 0.6 } }',
    '  chat-b: { provider: fake, upstream: chaos-b, type: chat, quality: 0.6, cost: { input_per_mtok: 0.1, output_per_mtok: 0.4 } }',
    '  embed: { provider: fake, upstream: chaos-embed, type: embedding, dimensions: 8, cost: { input_per_mtok: 0.02, output_per_mtok: 0 } }',
    'routes:',
    '  - { name: learn, models: [auto], strategy: feedback_driven, targets: [fake/chat-a, fake/chat-b] }',
    // The soak measures faults, not the per-key limit: 40 req/s on one key is far over the default 600/min.
    'limits: { requests_per_minute_per_key: 1000000, experiment_creates_per_hour: 1000 }',
    'organizations:',
    `  ${ORG}:`,
    '    plan: pro',
    '    features: [has_test_ab, feedback_routing, explain]',
    '    api_keys:',
    `      - { id: chaos-rw, key: "${KEY}", permissions: [read, write] }`,
    `      - { id: chaos-explain, key: "${EXPLAIN_KEY}", permissions: [read, write] }`,
    '',
  ].join('\n');
}

/** One HTTP call, timed, never throwing: { status, ms, kind: http | conn | timeout | broken, code, body }. */
async function call(url, { method = 'POST', headers = {}, body, timeoutMs, stream = false }) {
  const t0 = performance.now();
  try {
    const res = await fetch(url, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const ms = performance.now() - t0;
    let code = null;
    let json = null;
    if (!stream || res.status !== 200) {
      try {
        json = JSON.parse(text);
        code = json?.error?.code ?? null;
      } catch {}
    }
    // A stream that answered 200 must end with [DONE] and carry no error event.
    if (stream && res.status === 200 && (!text.includes('data: [DONE]') || /^data: \{"error"/m.test(text))) {
      return { status: res.status, ms, kind: 'broken', code: /"code":"([^"]+)"/.exec(text)?.[1] ?? null };
    }
    return { status: res.status, ms, kind: 'http', code, json, message: res.status >= 500 ? String(json?.error?.message ?? '').slice(0, 120) : undefined };
  } catch (err) {
    const ms = performance.now() - t0;
    if (err?.name === 'TimeoutError' || err?.name === 'AbortError') return { status: null, ms, kind: 'timeout', code: 'client_timeout' };
    return { status: null, ms, kind: 'conn', code: err?.cause?.code ?? err?.code ?? String(err?.message ?? err).slice(0, 60) };
  }
}

/** The harness's own reads of Postgres (never through the gateway); null while it is unreachable. */
async function pgQuery(url, sql, params = []) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2000, statement_timeout: 10_000, query_timeout: 12_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.query(sql, params)).rows;
  } catch {
    return null;
  } finally {
    client.end().catch(() => {});
  }
}

/** Experiments and their event counts, as the harness compares them around experiments writes. */
async function experimentsSnapshot(url) {
  const exps = await pgQuery(url, 'SELECT id::text, status FROM experiments WHERE org_id = $1 ORDER BY id', [ORG]);
  if (!exps) return null;
  const events = await pgQuery(url, 'SELECT experiment_id::text AS id, kind, count(*)::int AS n FROM experiment_events WHERE org_id = $1 GROUP BY 1, 2', [ORG]);
  if (!events) return null;
  return { experiments: Object.fromEntries(exps.map((r) => [r.id, r.status])), events: Object.fromEntries(events.map((r) => [`${r.id}:${r.kind}`, r.n])) };
}

const canon = (snap) => JSON.stringify({ e: Object.entries(snap.experiments).sort(), v: Object.entries(snap.events).filter(([, n]) => n > 0).sort() });

/** What a successful experiments write must have changed (the API's documented effects). */
function applyEffect(snap, op) {
  const s = { experiments: { ...snap.experiments }, events: { ...snap.events } };
  const bump = (id, kind) => (s.events[`${id}:${kind}`] = (s.events[`${id}:${kind}`] ?? 0) + 1);
  if (op.op === 'create' && op.status === 201 && op.id) {
    s.experiments[op.id] = 'active';
    bump(op.id, 'created');
    bump(op.id, 'started');
  }
  if (op.op === 'rollback' && op.status === 200 && op.id) {
    s.experiments[op.id] = 'rolled_back';
    bump(op.id, 'rolled_back');
  }
  return s;
}

/**
 * Walks the ledger of snapshots and experiments calls: between two consecutive snapshots, the
 * state must have changed exactly as the calls that answered 2xx say. A difference with a call that
 * answered 5xx in between is a failed write that changed something; one with only timeouts or
 * refused connections in between is indeterminate (the client never learnt the outcome).
 */
function checkExperiments(ledger) {
  const out = { calls: 0, failed_writes: 0, failed_writes_checked: 0, changed_by_failed_writes: 0, unexplained_changes: 0, indeterminate: 0, violations: [] };
  let last = null;
  let between = [];
  for (const entry of ledger) {
    if (entry.type === 'op') {
      out.calls++;
      if (entry.op !== 'list' && (entry.status ?? 0) >= 500) out.failed_writes++;
      between.push(entry);
      continue;
    }
    if (!entry.snap) continue;
    if (last) {
      let expected = last;
      for (const op of between) expected = applyEffect(expected, op);
      const failed = between.filter((op) => op.op !== 'list' && (op.status ?? 0) >= 500);
      const unknown = between.filter((op) => op.op !== 'list' && op.status === null);
      out.failed_writes_checked += failed.length;
      if (canon(expected) !== canon(entry.snap)) {
        const what = { at_s: entry.at_s, calls: between.map((op) => `${op.op} ${op.id ?? ''} → ${op.status ?? op.code}`), expected: JSON.parse(canon(expected)), actual: JSON.parse(canon(entry.snap)) };
        if (failed.length) (out.changed_by_failed_writes++, out.violations.push({ kind: 'changed_by_failed_write', ...what }));
        else if (unknown.length) (out.indeterminate++, out.violations.push({ kind: 'indeterminate', ...what }));
        else (out.unexplained_changes++, out.violations.push({ kind: 'unexplained_change', ...what }));
      }
    }
    last = entry.snap;
    between = [];
  }
  return out;
}

/** A process's RSS in MiB, or null once it has gone: a process that is exiting has no VmRSS line (NaN) before its /proc entry goes (a throw). */
function rssOf(pid) {
  try {
    const mib = procs.rssMiB(pid);
    return Number.isFinite(mib) ? round(mib, 1) : null;
  } catch {
    return null;
  }
}

/** Per-phase figures: counts by endpoint and status, p50/p99 overall and per endpoint. */
function summarise(records, phases) {
  const byPhase = {};
  for (const ph of phases) byPhase[ph] = [];
  for (const r of records) (byPhase[r.phase] ??= []).push(r);
  const statusKey = (r) => (r.kind === 'http' ? String(r.status) : r.kind);
  const out = {};
  for (const [phase, list] of Object.entries(byPhase)) {
    if (!list.length) continue;
    const p = percentiles(list.map((r) => r.ms));
    const endpoints = {};
    for (const r of list) {
      const e = (endpoints[r.endpoint] ??= { requests: 0, statuses: {}, ms: [] });
      e.requests++;
      e.statuses[statusKey(r)] = (e.statuses[statusKey(r)] ?? 0) + 1;
      e.ms.push(r.ms);
    }
    for (const e of Object.values(endpoints)) {
      const q = percentiles(e.ms);
      e.p50_ms = round(q(50), 1);
      e.p99_ms = round(q(99), 1);
      e.max_ms = round(q(100), 1);
      delete e.ms;
    }
    out[phase] = { requests: list.length, p50_ms: round(p(50), 1), p99_ms: round(p(99), 1), max_ms: round(p(100), 1), endpoints };
  }
  return out;
}

/** Every non-2xx outcome grouped by (phase, endpoint, status or error kind, code, message), with when it happened. */
function incidents(records) {
  const groups = new Map();
  for (const r of records) {
    if (r.kind === 'http' && r.status < 400) continue;
    const k = [r.phase, r.endpoint, r.kind === 'http' ? r.status : r.kind, r.code ?? '', r.message ?? ''].join('|');
    const g = groups.get(k) ?? { phase: r.phase, endpoint: r.endpoint, status: r.kind === 'http' ? r.status : r.kind, code: r.code ?? null, message: r.message || undefined, count: 0, first_s: r.t, last_s: r.t, replicas: {} };
    g.count++;
    g.first_s = Math.min(g.first_s, r.t);
    g.last_s = Math.max(g.last_s, r.t);
    g.replicas[r.replica] = (g.replicas[r.replica] ?? 0) + 1;
    groups.set(k, g);
  }
  return [...groups.values()].map((g) => ({ ...g, first_s: round(g.first_s, 1), last_s: round(g.last_s, 1) })).sort((a, b) => a.first_s - b.first_s);
}

/** Lines of a gateway log at level error or fatal (pino levels 50, 60), grouped by message. */
function logErrors(file) {
  const groups = {};
  const count = (k) => (groups[k] = (groups[k] ?? 0) + 1);
  try {
    procs.eachLine(file, (line) => {
      if (!line.startsWith('{')) {
        if (/Error|at .*\(/.test(line)) count(`(not JSON) ${line.slice(0, 120)}`);
        return;
      }
      try {
        const j = JSON.parse(line);
        if (j.level >= 50) count(`${j.level === 60 ? 'fatal' : 'error'}: ${String(j.msg ?? '').slice(0, 160)}${j.err?.message ? ` (${String(j.err.message).slice(0, 120)})` : ''}`);
      } catch {}
    });
  } catch {}
  return groups;
}

async function metricsOf(url) {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(3000) })).text();
    const sum = (name) => {
      let total = null;
      for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'gm'))) total = (total ?? 0) + Number(m[1]);
      return total;
    };
    return {
      trace_buffer_depth: sum('gateway_trace_buffer_depth'),
      trace_spool_bytes: sum('gateway_trace_spool_bytes'),
      traces_written: sum('gateway_traces_written_total'),
      traces_dropped: sum('gateway_traces_dropped_total'),
      trace_write_failures: sum('gateway_trace_write_failures_total'),
      traces_spooled: sum('gateway_traces_spooled_total'),
      traces_replayed: sum('gateway_traces_replayed_total'),
    };
  } catch {
    return null;
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const sch = schedule(args);
  const outFile = args.out ?? path.join(procs.ROOT, 'bench', 'results', 'chaos-latest.json');
  const command = `npm run soak:chaos${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const timeoutMs = args.timeout * 1000;
  const runId = `chaos-${process.pid}-${Date.now().toString(36)}`;

  const cleanups = procs.cleanupStack(log);
  const cleanup = cleanups.run;

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-chaos-'));
  cleanups.push(() => (args.keepLogs ? log(`kept logs in ${tmp}`) : fs.rmSync(tmp, { recursive: true, force: true })));

  let commit = 'unknown';
  let dirty = false;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: procs.ROOT, encoding: 'utf8' }).trim();
    dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: procs.ROOT, encoding: 'utf8' }).trim() !== '';
  } catch {}
  const report = {
    meta: {
      date: new Date().toISOString(),
      command,
      commit,
      src_uncommitted_changes: dirty,
      node: process.version,
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      rate_per_s: args.rate,
      schedule_s: sch,
      mix: MIX,
      load_balancing: 'round-robin over the replicas in rotation; replica B leaves the rotation before its SIGTERM and rejoins once /health answers',
    },
  };

  const records = [];
  const events = [];
  const ledger = [];
  let phase = 'warmup';
  const phaseNames = ['warmup', 'baseline', 'redis-frozen', 'redis-killed', 'postgres-down', 'postgres-back', 'replica-restart', 'recovery'];
  const t0 = () => (Date.now() - runStart) / 1000;
  let runStart = Date.now();
  const event = (what, extra = {}) => {
    events.push({ at_s: round(t0(), 1), phase, what, ...extra });
    log(`${what}${Object.keys(extra).length ? ` ${JSON.stringify(extra)}` : ''}`);
  };

  let exitCode = 2;
  try {
    log('building the gateway (nest build)…');
    const build = procs.buildGateway(`chaos-${process.pid}`);
    if (!args.keepBuild) cleanups.push(() => build.remove());
    report.meta.build_ms = build.ms;

    // Acknowledged commits must survive `pg_ctl stop -m immediate`, as on a production server.
    const pg = await servers.startPostgres({ durableCommits: true });
    if (pg.skipped) throw new Error(`Postgres: ${pg.skipped}`);
    cleanups.push(() => (args.keepLogs ? fs.copyFileSync(pg.log, path.join(tmp, 'postgres.log')) : null, pg.stop()));
    const redis = await servers.startRedis();
    if (redis.skipped) throw new Error(`Redis: ${redis.skipped}`);
    // A frozen Redis must be woken before anything tries to stop it.
    cleanups.push(() => {
      const pid = redis.pid();
      if (pid) process.kill(pid, 'SIGCONT');
      redis.stop();
    });
    log(`Postgres ${pg.url} (pid ${pg.pid()}), Redis ${redis.url} (pid ${redis.pid()})`);

    const fake = await procs.startFake({ chunks: 20, delayMs: 10 });
    cleanups.push(() => fake.stop());
    const config = path.join(tmp, 'gateway.yaml');
    fs.writeFileSync(config, gatewayYaml(fake.url));
    const pepper = crypto.randomBytes(32).toString('base64');

    const replicas = [];
    const startReplica = async (r) => {
      const env = procs.gatewayEnv({
        tmp,
        port: r.port,
        config,
        dataDir: path.join(tmp, `data-${r.name}`),
        extra: { DATABASE_URL: pg.url, REDIS_URL: redis.url, GATEWAY_KEY_PEPPER: pepper },
      });
      const t = Date.now();
      r.gw = await procs.startGateway({ main: build.main, env, port: r.port, logFile: r.logFile });
      r.processes.push({ pid: r.gw.pid, started_s: round(t0(), 1), up_ms: Date.now() - t, rss_start_mib: null, rss_end_mib: null, rss_peak_mib: null });
      return r.gw;
    };
    for (const name of ['A', 'B']) {
      const r = { name, port: await servers.freePort(), logFile: path.join(tmp, `gateway-${name}.log`), gw: null, inRotation: false, processes: [], metricsAtStop: [] };
      cleanups.push(() => r.gw?.stop());
      await startReplica(r);
      r.inRotation = true;
      replicas.push(r);
      log(`replica ${name} on ${r.gw.url} (pid ${r.gw.pid})`);
    }

    // One request each way must succeed before anything is measured.
    for (const r of replicas) {
      const res = await call(`${r.gw.url}/v1/chat/completions`, { headers: { authorization: `Bearer ${KEY}` }, body: { model: 'auto', messages: [{ role: 'user', content: 'hi' }] }, timeoutMs });
      if (res.status !== 200) throw new Error(`replica ${r.name}: first chat answered ${res.status ?? res.code}\n${procs.tail(r.logFile)}`);
      const emb = await call(`${r.gw.url}/v1/embeddings`, { headers: { authorization: `Bearer ${KEY}` }, body: { model: 'embed', input: ['hi'] }, timeoutMs });
      if (emb.status !== 200) throw new Error(`replica ${r.name}: first embeddings answered ${emb.status ?? emb.code}: ${JSON.stringify(emb.json)}\n${procs.tail(r.logFile)}`);
    }

    // ---- traffic ----
    let rr = 0;
    let seq = 0;
    let inFlight = 0;
    let skipped = 0;
    const served = []; // session ids with a 2xx chat answer, newest last (feedback picks from them)
    const maxInFlight = Math.max(50, args.rate * args.timeout);
    const pick = () => {
      const live = replicas.filter((r) => r.inRotation);
      return live[rr++ % live.length];
    };
    const auth = (key = KEY) => ({ authorization: `Bearer ${key}` });
    const fire = async (endpoint, r, fn) => {
      const id = `${runId}-${++seq}`;
      const rec = { id, endpoint, replica: `${r.name}${r.processes.length}`, phase, t: t0() };
      inFlight++;
      try {
        Object.assign(rec, await fn(id));
      } finally {
        inFlight--;
      }
      // Only a create's new id is kept from the body (the experiments ledger needs it).
      if (rec.status === 201 && typeof rec.json?.id === 'string') rec.createdId = rec.json.id;
      delete rec.json;
      records.push(rec);
      return rec;
    };
    const sendOne = (kind) => {
      const r = pick();
      if (!r) return;
      if (inFlight >= maxInFlight) return void skipped++;
      const url = r.gw.url;
      if (kind === 'feedback' && served.length === 0) kind = 'chat';
      if (kind === 'chat' || kind === 'stream') {
        const session = `${runId}-s${seq + 1}`;
        const stream = kind === 'stream';
        return fire(kind, r, (id) =>
          call(`${url}/v1/chat/completions`, {
            headers: { ...auth(), 'x-request-id': id, 'gateway-session-id': session },
            body: { model: 'auto', messages: [{ role: 'user', content: `Say something about the sea, please (${id}).` }], max_tokens: 64, ...(stream ? { stream: true } : {}) },
            timeoutMs,
            stream,
          }),
        ).then((rec) => {
          if (rec.kind === 'http' && rec.status === 200) {
            served.push(session);
            if (served.length > 500) served.splice(0, served.length - 500);
          }
        });
      }
      if (kind === 'embeddings') {
        return fire(kind, r, (id) => call(`${url}/v1/embeddings`, { headers: { ...auth(), 'x-request-id': id }, body: { model: 'embed', input: [`first text ${id}`, 'second text'], encoding_format: 'float' }, timeoutMs }));
      }
      const session = served[Math.floor(Math.random() * served.length)];
      return fire('feedback', r, (id) =>
        call(`${url}/v1/feedback`, { headers: { ...auth(), 'x-request-id': id }, body: { session_id: session, score: Math.floor(Math.random() * 11), useful: Math.random() < 0.7 }, timeoutMs }),
      ).then((rec) => {
        rec.session = session;
      });
    };

    let stopTraffic = false;
    let wakeAll;
    const stopped = new Promise((r) => (wakeAll = r));
    // The loops' waits end as soon as the traffic stops, so the drain does not wait out an interval.
    const pause = (ms) => Promise.race([sleep(ms), stopped]);
    const pending = new Set();
    const track = (p) => {
      if (!p) return;
      pending.add(p);
      p.finally(() => pending.delete(p));
    };
    const trafficLoop = async () => {
      const period = 1000 / args.rate;
      let next = performance.now();
      const maxCount = Math.ceil(args.rate * (sch.total + sch.warmup + 600)) + 100;
      for (let i = 0; i < maxCount && !stopTraffic; i++) {
        track(sendOne(MIX[i % MIX.length]));
        next += period;
        const wait = next - performance.now();
        // Fell far behind (the harness was starved): skip ahead rather than burst.
        if (wait < -1000) next = performance.now();
        else if (wait > 0) await sleep(wait);
      }
    };

    const explainLoop = async () => {
      const maxCount = Math.ceil((sch.total + 600) / Math.max(1, args.explainEvery)) + 10;
      for (let i = 0; i < maxCount && !stopTraffic; i++) {
        await pause(args.explainEvery * 1000);
        if (stopTraffic) break;
        const r = pick();
        if (!r) continue;
        track(fire('explain', r, (id) =>
          call(`${r.gw.url}/v1/routing/explain`, { headers: { ...auth(EXPLAIN_KEY), 'x-request-id': id }, body: { request: { model: 'auto', messages: [{ role: 'user', content: 'Which model would answer this?' }] } }, timeoutMs }),
        ));
      }
    };

    // Experiments: create, list, rollback, list, … one call every experimentsEvery seconds, each
    // between two snapshots of the tables (read straight from Postgres when it answers).
    const expState = { activeId: null, lastId: null };
    const snapshot = async () => ledger.push({ type: 'snapshot', at_s: round(t0(), 1), snap: await experimentsSnapshot(pg.url) });
    const experimentsLoop = async () => {
      const ops = ['create', 'list', 'rollback', 'list'];
      // While Postgres is down, only writes: each outage must see a create and a rollback answer 503.
      const outageOps = ['create', 'rollback'];
      let outage = 0;
      const maxCount = Math.ceil((sch.total + 600) / Math.max(1, args.experimentsEvery)) + 10;
      await snapshot();
      for (let i = 0; i < maxCount && !stopTraffic; i++) {
        await pause(args.experimentsEvery * 1000);
        if (stopTraffic) break;
        const r = pick();
        if (!r) continue;
        let op = phase === 'postgres-down' ? outageOps[outage++ % outageOps.length] : ops[i % ops.length];
        if (op === 'rollback' && !expState.activeId && !expState.lastId) op = 'list';
        const confirm = { 'x-gateway-confirm': 'experiments' };
        let target = null;
        const rec = await fire(`experiments-${op}`, r, (id) => {
          if (op === 'create') {
            return call(`${r.gw.url}/v1/experiments`, {
              headers: { ...auth(), ...confirm, 'x-request-id': id },
              body: { type: 'canary', baseline: { provider: 'fake', model: 'chat-a' }, candidate: { provider: 'fake', model: 'chat-b' }, traffic_pct: 20, stop_rule: { min_n: 1000000, max_regression: 0.5 } },
              timeoutMs,
            });
          }
          if (op === 'rollback') {
            target = expState.activeId ?? expState.lastId;
            return call(`${r.gw.url}/v1/experiments/${target}/rollback`, { headers: { ...auth(), ...confirm, 'x-request-id': id }, timeoutMs });
          }
          return call(`${r.gw.url}/v1/experiments`, { method: 'GET', headers: { ...auth(), 'x-request-id': id }, timeoutMs });
        });
        const entry = { type: 'op', op, at_s: rec.t, status: rec.kind === 'http' ? rec.status : null, code: rec.code, id: target };
        if (op === 'create' && rec.status === 201) {
          entry.id = rec.createdId;
          expState.activeId = expState.lastId = rec.createdId;
        }
        if (op === 'rollback' && rec.status === 200) expState.activeId = null;
        ledger.push(entry);
        await snapshot();
      }
    };

    // ---- RSS sampling ----
    const rssSamples = [];
    let sampling = true;
    const rssLoop = async () => {
      const every = Math.max(1000, Math.min(10_000, (sch.total * 1000) / 60));
      for (let i = 0; i < 100_000 && sampling; i++) {
        for (const r of replicas) {
          const p = r.processes.at(-1);
          const rss = r.gw ? rssOf(r.gw.pid) : null;
          if (rss !== null) {
            rssSamples.push({ at_s: round(t0(), 1), replica: r.name, pid: r.gw.pid, rss_mib: rss });
            p.rss_peak_mib = Math.max(p.rss_peak_mib ?? 0, rss);
          }
        }
        await sleep(every);
      }
    };

    // ---- the run ----
    runStart = Date.now();
    const traffic = trafficLoop();
    const explain = explainLoop();
    const experiments = experimentsLoop();
    const rssJob = rssLoop();
    const deadline = Date.now() + sch.total * 1000 + sch.warmup * 1000;
    const setPhase = (name) => {
      phase = name;
      event(`phase ${name}`);
    };
    event('warmup');
    await sleep(sch.warmup * 1000);
    for (const r of replicas) r.processes.at(-1).rss_start_mib = rssOf(r.gw.pid);
    setPhase('baseline');
    await sleep(sch.baseline * 1000);

    // Redis frozen: the process exists and keeps its sockets, but answers nothing.
    setPhase('redis-frozen');
    const redisPid = redis.pid();
    if (!redisPid) throw new Error('Redis is not running before the freeze');
    process.kill(redisPid, 'SIGSTOP');
    event('redis SIGSTOP', { pid: redisPid });
    try {
      await sleep(sch.redisFreeze * 1000);
    } finally {
      process.kill(redisPid, 'SIGCONT');
    }
    event('redis SIGCONT', { pid: redisPid });
    setPhase('recovery');
    await sleep(sch.quiet * 1000);

    setPhase('redis-killed');
    const killedPid = redis.pid();
    if (!killedPid) throw new Error('Redis is not running before the kill');
    process.kill(killedPid, 'SIGKILL');
    event('redis SIGKILL', { pid: killedPid });
    await sleep(sch.redisDead * 1000);
    await redis.restart();
    event('redis restarted', { pid: redis.pid(), port: redis.port });
    setPhase('recovery');
    await sleep(sch.quiet * 1000);

    setPhase('postgres-down');
    const pgPid = pg.pid();
    await pg.down('immediate');
    event('postgres stopped (pg_ctl stop -m immediate)', { pid: pgPid });
    await sleep(sch.pgDown * 1000);
    await pg.up();
    event('postgres started', { pid: pg.pid(), port: pg.port });
    // Each replica's store breaker lets calls through again once its probe (every
    // stores.probe_interval_ms, 1 s, waiting up to probe_timeout_ms, 1 s) sees Postgres answer: what
    // needs Postgres may still answer 503 for that long after it is back.
    setPhase('postgres-back');
    await sleep(PG_BACK_S * 1000);
    setPhase('recovery');
    await sleep(Math.max(0, sch.quiet - PG_BACK_S) * 1000);

    // Replica B: out of the rotation first (a load balancer that follows readiness), then SIGTERM:
    // what it had in flight drains; then a new process on the same port rejoins.
    setPhase('replica-restart');
    const b = replicas[1];
    b.inRotation = false;
    const old = b.processes.at(-1);
    old.rss_end_mib = rssOf(b.gw.pid);
    b.metricsAtStop.push(await metricsOf(b.gw.url));
    event('replica B out of rotation, SIGTERM', { pid: b.gw.pid });
    const stopT = Date.now();
    await b.gw.stop('SIGTERM');
    old.exit = { code: b.gw.child.exitCode, signal: b.gw.child.signalCode, stop_ms: Date.now() - stopT };
    event('replica B exited', old.exit);
    await startReplica(b);
    b.inRotation = true;
    event('replica B back in rotation', { pid: b.gw.pid });
    setPhase('recovery');
    await sleep(5000);
    b.processes.at(-1).rss_start_mib = rssOf(b.gw.pid);
    await sleep(Math.max(0, deadline - Date.now()));

    // ---- drain ----
    event('traffic stops');
    stopTraffic = true;
    wakeAll();
    await traffic;
    await Promise.race([Promise.allSettled([...pending]), sleep(timeoutMs + 5000)]);
    await Promise.race([Promise.allSettled([explain, experiments]), sleep(timeoutMs + 5000)]);
    const drainStart = Date.now();
    let depth = null;
    let spoolBytes = null;
    // Drained: nothing in the replicas' buffers, nor in their trace spools waiting to be replayed.
    for (let i = 0; i < 10_000 && Date.now() - drainStart < args.drain * 1000; i++) {
      const ms = await Promise.all(replicas.map((r) => metricsOf(r.gw.url)));
      depth = ms.reduce((n, m) => n + (m?.trace_buffer_depth ?? 1), 0);
      spoolBytes = ms.reduce((n, m) => n + (m?.trace_spool_bytes ?? 1), 0);
      if (depth === 0 && spoolBytes === 0) break;
      await sleep(500);
    }
    event('trace buffers drained', { depth, spool_bytes: spoolBytes, wait_ms: Date.now() - drainStart });
    // Let a batch whose write is acknowledged settle, then let the replicas idle before the end RSS.
    await sleep(5000);
    sampling = false;
    await rssJob;
    for (const r of replicas) r.processes.at(-1).rss_end_mib = rssOf(r.gw.pid);
    const finalMetrics = await Promise.all(replicas.map((r) => metricsOf(r.gw.url)));

    // ---- traces ----
    const rows = await pgQuery(pg.url, 'SELECT request_id, count(*)::int AS n, min(status)::int AS status FROM decision_traces WHERE request_id LIKE $1 GROUP BY 1', [`${runId}-%`]);
    if (!rows) throw new Error('could not read decision_traces after the run');
    const rowsById = new Map(rows.map((r) => [r.request_id, r.n]));
    const traces = { checked: 0, lost: 0, duplicated: 0, rows_for_non_2xx: 0, lost_by_phase: {}, duplicated_by_phase: {}, lost_examples: [], duplicated_examples: [] };
    for (const rec of records) {
      const n = rowsById.get(rec.id) ?? 0;
      if (!SERVED.includes(rec.endpoint)) continue;
      if (rec.kind === 'http' && rec.status >= 200 && rec.status < 300) {
        traces.checked++;
        if (n === 0) {
          traces.lost++;
          traces.lost_by_phase[rec.phase] = (traces.lost_by_phase[rec.phase] ?? 0) + 1;
          if (traces.lost_examples.length < 10) traces.lost_examples.push({ id: rec.id, endpoint: rec.endpoint, phase: rec.phase, replica: rec.replica, at_s: round(rec.t, 1) });
        } else if (n > 1) {
          traces.duplicated++;
          traces.duplicated_by_phase[rec.phase] = (traces.duplicated_by_phase[rec.phase] ?? 0) + 1;
          if (traces.duplicated_examples.length < 10) traces.duplicated_examples.push({ id: rec.id, rows: n, endpoint: rec.endpoint, phase: rec.phase, replica: rec.replica, at_s: round(rec.t, 1) });
        }
      } else if (n > 0) traces.rows_for_non_2xx += n;
    }
    traces.dropped_metric = [...replicas.flatMap((r) => r.metricsAtStop), ...finalMetrics].reduce((n, m) => n + (m?.traces_dropped ?? 0), 0);
    traces.write_failures_metric = [...replicas.flatMap((r) => r.metricsAtStop), ...finalMetrics].reduce((n, m) => n + (m?.trace_write_failures ?? 0), 0);
    // The trace spool (docs/operations.md "The trace spool"): what the replicas put on disk while
    // Postgres was out, what they replayed, and what is left (nothing, once drained).
    traces.spooled_metric = [...replicas.flatMap((r) => r.metricsAtStop), ...finalMetrics].reduce((n, m) => n + (m?.traces_spooled ?? 0), 0);
    traces.replayed_metric = [...replicas.flatMap((r) => r.metricsAtStop), ...finalMetrics].reduce((n, m) => n + (m?.traces_replayed ?? 0), 0);
    traces.spool_bytes_left = finalMetrics.reduce((n, m) => n + (m?.trace_spool_bytes ?? 0), 0);
    // The Postgres outage on its own: every 2xx answer given while Postgres was down or coming back
    // has exactly one row (request ids sent vs rows), however the traces got there.
    const outagePhases = ['postgres-down', 'postgres-back'];
    traces.outage = {
      checked: records.filter((rec) => outagePhases.includes(rec.phase) && SERVED.includes(rec.endpoint) && rec.kind === 'http' && rec.status >= 200 && rec.status < 300).length,
      lost: outagePhases.reduce((n, ph) => n + (traces.lost_by_phase[ph] ?? 0), 0),
      duplicated: outagePhases.reduce((n, ph) => n + (traces.duplicated_by_phase[ph] ?? 0), 0),
    };

    // ---- feedback: every answered 200 is stored (the latest answer per session wins, so only presence is checked) ----
    const fbRows = await pgQuery(pg.url, 'SELECT session_id FROM feedback WHERE session_id LIKE $1', [`${runId}-%`]);
    if (!fbRows) throw new Error('could not read feedback after the run');
    const storedSessions = new Set(fbRows.map((r) => r.session_id));
    const feedback = { answered_200: 0, sessions: 0, lost_sessions: 0, lost_by_phase: {}, lost_examples: [] };
    const answeredSessions = new Map();
    for (const rec of records) {
      if (rec.endpoint !== 'feedback' || rec.kind !== 'http' || rec.status !== 200) continue;
      feedback.answered_200++;
      if (!answeredSessions.has(rec.session)) answeredSessions.set(rec.session, rec);
    }
    feedback.sessions = answeredSessions.size;
    for (const [session, rec] of answeredSessions) {
      if (storedSessions.has(session)) continue;
      feedback.lost_sessions++;
      feedback.lost_by_phase[rec.phase] = (feedback.lost_by_phase[rec.phase] ?? 0) + 1;
      if (feedback.lost_examples.length < 10) feedback.lost_examples.push({ session, phase: rec.phase, replica: rec.replica, at_s: round(rec.t, 1) });
    }

    // ---- experiments ----
    await snapshot();
    const exp = checkExperiments(ledger);

    // ---- the report ----
    const phasesSeen = [...new Set(records.map((r) => r.phase))];
    const byPhase = summarise(records, phaseNames.filter((p) => phasesSeen.includes(p)));
    const inc = incidents(records);
    const rss = replicas.map((r) => ({
      replica: r.name,
      processes: r.processes.map((p) => ({ ...p, growth_mib: p.rss_start_mib !== null && p.rss_end_mib !== null ? round(p.rss_end_mib - p.rss_start_mib, 1) : null })),
    }));
    const byKind = (list, pred) => list.filter(pred).length;
    const servedFailures = records.filter((r) => SERVED.includes(r.endpoint) && (r.kind !== 'http' || r.status >= 500));
    const feedbackFailures = records.filter((r) => r.endpoint === 'feedback' && (r.kind !== 'http' || r.status >= 500));
    const criteria = [
      { name: 'chat and embeddings: no 5xx, connection error, timeout or broken stream in any phase', met: servedFailures.length === 0, value: servedFailures.length },
      { name: 'feedback: no 5xx, connection error or timeout in any phase (held while Postgres is down)', met: feedbackFailures.length === 0, value: feedbackFailures.length },
      { name: 'feedback: every session answered 200 is stored', met: feedback.lost_sessions === 0, value: feedback.lost_sessions },
      { name: 'decision traces: 0 lost', met: traces.lost === 0, value: traces.lost },
      { name: 'decision traces: 0 duplicated', met: traces.duplicated === 0, value: traces.duplicated },
      { name: `decision traces across the Postgres outage: 0 lost and 0 duplicated of ${traces.outage.checked}, the trace spool empty after the drain`, met: traces.outage.checked > 0 && traces.outage.lost === 0 && traces.outage.duplicated === 0 && traces.spool_bytes_left === 0, value: `${traces.outage.lost} lost, ${traces.outage.duplicated} duplicated, ${traces.spool_bytes_left} bytes left` },
      { name: 'experiments: a write that answered 5xx changed nothing, and every change is explained by a 2xx', met: exp.changed_by_failed_writes === 0 && exp.unexplained_changes === 0, value: exp.changed_by_failed_writes + exp.unexplained_changes },
      ...rss.flatMap((r) => r.processes.map((p) => ({ name: `RSS growth < ${RSS_BUDGET_MIB} MiB: replica ${r.replica} pid ${p.pid}`, met: p.growth_mib !== null && p.growth_mib < RSS_BUDGET_MIB, value: p.growth_mib }))),
    ];
    Object.assign(report, {
      totals: {
        requests: records.length,
        skipped_by_harness: skipped,
        http_2xx: byKind(records, (r) => r.kind === 'http' && r.status < 300),
        http_4xx: byKind(records, (r) => r.kind === 'http' && r.status >= 400 && r.status < 500),
        http_5xx: byKind(records, (r) => r.kind === 'http' && r.status >= 500),
        connection_errors: byKind(records, (r) => r.kind === 'conn'),
        timeouts: byKind(records, (r) => r.kind === 'timeout'),
        broken_streams: byKind(records, (r) => r.kind === 'broken'),
      },
      phases: byPhase,
      incidents: inc,
      slowest: [...records].sort((x, y) => y.ms - x.ms).slice(0, 25).map((x) => ({ id: x.id, endpoint: x.endpoint, phase: x.phase, replica: x.replica, at_s: round(x.t, 2), ms: round(x.ms, 1), status: x.status ?? x.kind })),
      traces,
      feedback,
      experiments: { ...exp, ledger: ledger.map((e) => (e.type === 'snapshot' ? { type: 'snapshot', at_s: e.at_s, reachable: !!e.snap, experiments: e.snap ? Object.keys(e.snap.experiments).length : null } : e)) },
      rss,
      rss_samples: rssSamples,
      gateway_log_errors: Object.fromEntries(replicas.map((r) => [r.name, logErrors(r.logFile)])),
      events,
      criteria,
      pass: criteria.every((c) => c.met),
    });
    fs.mkdirSync(path.dirname(outFile), { recursive: true });
    fs.writeFileSync(outFile, JSON.stringify(report, null, 2) + '\n');
    process.stdout.write(render(report) + '\n');
    log(`wrote ${path.relative(process.cwd(), outFile)}; ${report.pass ? 'PASS' : 'FAIL'}`);
    exitCode = report.pass ? 0 : 1;
  } catch (err) {
    log(`failed: ${err.stack ?? err.message}`);
    exitCode = 2;
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}

function render(r) {
  const L = [];
  const m = r.meta;
  L.push(`### Chaos soak — ${m.date.slice(0, 10)}, commit ${m.commit}${m.src_uncommitted_changes ? ' (+ uncommitted src changes)' : ''}`);
  L.push('');
  L.push(`\`${m.command}\`: ${m.rate_per_s} req/s over 2 replicas, Node ${m.node}, ${m.cores} cores. Schedule (s): baseline ${m.schedule_s.baseline}, redis-frozen ${m.schedule_s.redisFreeze}, redis-killed ${m.schedule_s.redisDead}, postgres-down ${m.schedule_s.pgDown}, quiet ${round(m.schedule_s.quiet, 1)} between faults.`);
  L.push('');
  L.push('**Requests by phase** (statuses per endpoint; `conn` = connection error, `timeout` = client timeout, `broken` = a 200 stream without `[DONE]`)');
  L.push('');
  L.push('| phase | requests | p50 ms | p99 ms | max ms | chat | stream | embeddings | feedback | explain | experiments |');
  L.push('|---|---:|---:|---:|---:|---|---|---|---|---|---|');
  const fmt = (e) => (e ? Object.entries(e.statuses).map(([s, n]) => `${s}×${n}`).join(' ') : '');
  for (const [ph, s] of Object.entries(r.phases)) {
    const exps = Object.entries(s.endpoints).filter(([k]) => k.startsWith('experiments-')).map(([k, e]) => `${k.slice(12)}: ${fmt(e)}`).join('; ');
    L.push(`| ${ph} | ${s.requests} | ${s.p50_ms} | ${s.p99_ms} | ${s.max_ms} | ${fmt(s.endpoints.chat)} | ${fmt(s.endpoints.stream)} | ${fmt(s.endpoints.embeddings)} | ${fmt(s.endpoints.feedback)} | ${fmt(s.endpoints.explain)} | ${exps} |`);
  }
  L.push('');
  L.push('**Latency per endpoint and phase** (p50 / p99 ms)');
  L.push('');
  const eps = ['chat', 'stream', 'embeddings', 'feedback', 'explain'];
  L.push(`| phase | ${eps.join(' | ')} |`);
  L.push(`|---|${eps.map(() => '---').join('|')}|`);
  for (const [ph, s] of Object.entries(r.phases)) L.push(`| ${ph} | ${eps.map((e) => (s.endpoints[e] ? `${s.endpoints[e].p50_ms} / ${s.endpoints[e].p99_ms}` : '')).join(' | ')} |`);
  L.push('');
  if (r.incidents.length) {
    L.push('**Failures** (every non-2xx and error, grouped; seconds from the start)');
    L.push('');
    L.push('| phase | endpoint | status | code | count | from s | to s | message |');
    L.push('|---|---|---|---|---:|---:|---:|---|');
    for (const g of r.incidents.slice(0, 40)) L.push(`| ${g.phase} | ${g.endpoint} | ${g.status} | ${g.code ?? ''} | ${g.count} | ${g.first_s} | ${g.last_s} | ${(g.message ?? '').replace(/\|/g, '/')} |`);
    L.push('');
  }
  L.push(`**Slowest requests**: ${r.slowest.slice(0, 8).map((x) => `${x.ms} ms ${x.endpoint} in ${x.phase} at ${x.at_s} s (${x.replica}, ${x.status})`).join('; ')}.`);
  L.push('');
  const t = r.traces;
  L.push(`**Decision traces**: ${t.checked} 2xx chat/embeddings answers checked; lost ${t.lost}${t.lost ? ` (${JSON.stringify(t.lost_by_phase)})` : ''}, duplicated ${t.duplicated}${t.duplicated ? ` (${JSON.stringify(t.duplicated_by_phase)})` : ''}; rows for non-2xx answers ${t.rows_for_non_2xx}; the replicas' own counters: dropped ${t.dropped_metric}, failed batch writes ${t.write_failures_metric}, spooled ${t.spooled_metric}, replayed ${t.replayed_metric}, spool bytes left ${t.spool_bytes_left}. Across the Postgres outage alone: ${t.outage.checked} checked, lost ${t.outage.lost}, duplicated ${t.outage.duplicated}.`);
  L.push('');
  const f = r.feedback;
  if (f) {
    L.push(`**Feedback**: ${f.answered_200} answers 200 over ${f.sessions} sessions; sessions answered but not stored: ${f.lost_sessions}${f.lost_sessions ? ` (${JSON.stringify(f.lost_by_phase)})` : ''}.`);
    L.push('');
  }
  const e = r.experiments;
  L.push(`**Experiments**: ${e.calls} calls, ${e.failed_writes} writes answered 5xx (${e.failed_writes_checked} checked between snapshots); changed by a failed write ${e.changed_by_failed_writes}, unexplained changes ${e.unexplained_changes}, indeterminate (timeouts) ${e.indeterminate}.`);
  L.push('');
  L.push('**RSS** (MiB; start after warm-up, end after the drain and 5 s idle)');
  L.push('');
  L.push('| replica | pid | started at s | start | peak | end | growth |');
  L.push('|---|---:|---:|---:|---:|---:|---:|');
  for (const rep of r.rss) for (const p of rep.processes) L.push(`| ${rep.replica} | ${p.pid} | ${p.started_s} | ${p.rss_start_mib} | ${p.rss_peak_mib} | ${p.rss_end_mib} | ${p.growth_mib} |`);
  L.push('');
  const logs = Object.entries(r.gateway_log_errors).filter(([, g]) => Object.keys(g).length);
  if (logs.length) {
    L.push('**Gateway log errors** (level error/fatal, grouped)');
    L.push('');
    for (const [rep, g] of logs) for (const [msg, n] of Object.entries(g).slice(0, 15)) L.push(`- ${rep}: ${n}× ${msg}`);
    L.push('');
  }
  L.push('**Pass criteria**');
  L.push('');
  for (const c of r.criteria) L.push(`- ${c.met ? 'met' : '**NOT met**'}: ${c.name} (${c.value})`);
  L.push('');
  L.push(`**${r.pass ? 'PASS' : 'FAIL'}**`);
  return L.join('\n');
}

main().catch((err) => {
  log(`failed: ${err.stack ?? err.message}`);
  process.exit(2);
});
