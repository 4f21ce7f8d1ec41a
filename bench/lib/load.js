'use strict';
/**
 * One autocannon run (programmatic API) with sub-millisecond latencies: autocannon's own histogram
 * has 1 ms resolution, so every response's `process.hrtime` duration (its `response` event) is
 * recorded here and the percentiles are taken from the raw samples.
 */
const autocannon = require('autocannon');
const { percentiles, round } = require('./stats');

/**
 * @returns {Promise<{ rps, p50, p90, p99, requests, ok, non2xx, errors, timeouts, seconds }>}
 *   latencies in ms; `ok` counts 2xx responses.
 */
async function runLoad({ url, connections, seconds, body, headers, overallRate }) {
  const latencies = [];
  let ok = 0;
  let statusCounts = {};
  const started = process.hrtime.bigint();
  const instance = autocannon({
    url,
    method: 'POST',
    connections,
    pipelining: 1,
    duration: seconds,
    body,
    headers: { 'content-type': 'application/json', ...headers },
    timeout: 10,
    // autocannon stops at its sample tick: 100 ms ticks keep a run within 0.1 s of `seconds`.
    sampleInt: 100,
    ...(overallRate ? { overallRate } : {}),
  });
  instance.on('response', (_client, statusCode, _bytes, ms) => {
    if (statusCode >= 200 && statusCode < 300) {
      ok++;
      latencies.push(ms);
    }
    statusCounts[statusCode] = (statusCounts[statusCode] ?? 0) + 1;
  });
  const result = await instance;
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  const p = percentiles(latencies);
  return {
    rps: round(ok / wall, 1),
    p50: round(p(50)),
    p90: round(p(90)),
    p99: round(p(99)),
    requests: result.requests.total,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCounts,
    seconds: round(wall, 3),
  };
}

/**
 * Warms up gateways in two rounds: the load, a pause, the load again. V8 deoptimises much of a
 * gateway's request path in the first full collections after its warm-up load stops (its optimised
 * code holds weak references to objects that die with the warm-up's connections: `--trace-deopt`
 * shows ≈ 100 functions "marked for deoptimization, reason: weak objects" in that pause, and
 * `--trace-opt` ≈ 270 functions optimised again in the first 8 s run after it, against 6–80 in the
 * runs after a second round). Measured runs then see a gateway in service, not one re-compiling its
 * request path. `targets`: [{ url, body, headers }].
 */
async function warmUpTwice(targets, { seconds, pauseMs, rewarmSeconds, connections = 32 }) {
  await warmUpRound(targets.map((t) => ({ ...t, seconds })), connections);
  await warmUpSecondRound(targets.map((t) => ({ ...t, seconds: rewarmSeconds })), { pauseMs, connections });
}

/** The pause and the second round of `warmUpTwice`, for a harness whose first round is its own; each target's own `seconds`. */
async function warmUpSecondRound(targets, { pauseMs, connections = 32 }) {
  await new Promise((r) => setTimeout(r, pauseMs));
  await warmUpRound(targets, connections);
}

/** One round: each target's load for its own `seconds`, one after the other. */
async function warmUpRound(targets, connections) {
  for (const t of targets) await runLoad({ url: t.url, connections, seconds: t.seconds, body: t.body, headers: t.headers });
}

module.exports = { runLoad, warmUpTwice, warmUpSecondRound };
