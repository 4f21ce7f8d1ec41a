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

module.exports = { runLoad };
