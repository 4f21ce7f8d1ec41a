'use strict';
/**
 * Streaming clients on plain node:http.
 *  - streamOnce/runStreams: the latency client. It notes `process.hrtime.bigint()` when each body
 *    piece arrives and matches every content delta (`<seq>:<fake send time>`) to the fake's own send
 *    time of that chunk: transit = arrival − send; gap = (arrival_i − arrival_i−1) − (send_i − send_i−1),
 *    the time a hop adds between two chunks; `held` counts chunks that arrived only after the fake
 *    had already sent the next one (a chunk held back).
 *  - openSlowStreams: the memory client, holding thousands of slow streams open at once.
 */
const http = require('node:http');

const NS = 1e6; // ns per ms

/** Splits SSE text into complete events; returns [events, rest]. */
function splitEvents(buf) {
  const events = [];
  let start = 0;
  for (;;) {
    const end = buf.indexOf('\n\n', start);
    if (end < 0) break;
    events.push(buf.slice(start, end));
    start = end + 2;
  }
  return [events, buf.slice(start)];
}

/**
 * One streaming request. Resolves { status, ttfbMs, chunks: [{ seq, sent, arrived }], done, error }
 * (times as bigint ns). `abortAfter` closes the request after that many content chunks (soak).
 */
function streamOnce({ url, path, body, headers, agent, abortAfter }) {
  return new Promise((resolve) => {
    const chunks = [];
    let status = 0;
    let done = false;
    let buf = '';
    let settled = false;
    const t0 = process.hrtime.bigint();
    const finish = (error) => {
      if (settled) return;
      settled = true;
      const first = chunks[0];
      resolve({ status, ttfbMs: first ? Number(first.arrived - t0) / NS : null, chunks, done, error, aborted: error === 'aborted-by-client' });
    };
    const req = http.request(
      url + path,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        status = res.statusCode;
        res.setEncoding('utf8');
        res.on('data', (s) => {
          const arrived = process.hrtime.bigint();
          const [events, rest] = splitEvents(buf + s);
          buf = rest;
          for (const ev of events) {
            for (const line of ev.split('\n')) {
              if (!line.startsWith('data: ')) continue;
              const data = line.slice(6);
              if (data === '[DONE]') {
                done = true;
                continue;
              }
              let content;
              try {
                content = JSON.parse(data).choices?.[0]?.delta?.content;
              } catch {
                continue;
              }
              if (typeof content !== 'string') continue;
              const colon = content.indexOf(':');
              if (colon < 0) continue;
              chunks.push({ seq: Number(content.slice(0, colon)), sent: BigInt(content.slice(colon + 1)), arrived });
            }
          }
          if (abortAfter && chunks.length >= abortAfter && !done) {
            req.destroy();
            finish('aborted-by-client');
          }
        });
        res.on('end', () => finish(status >= 200 && status < 300 ? undefined : `status ${status}`));
        res.on('error', (err) => finish(err.message));
        res.on('aborted', () => finish('response aborted'));
      },
    );
    req.on('error', (err) => finish(err.message));
    req.end(body);
  });
}

/** Per-chunk timings of finished streams: transit, gap, held, missing (chunks not received in order). */
function chunkTimings(streams, expectedChunks) {
  const transit = [];
  const gaps = [];
  const ttfb = [];
  let held = 0;
  let missing = 0;
  let chunks = 0;
  for (const s of streams) {
    if (s.ttfbMs !== null) ttfb.push(s.ttfbMs);
    const c = s.chunks;
    if (expectedChunks && !s.aborted && c.length !== expectedChunks) missing += Math.abs(expectedChunks - c.length);
    for (let i = 0; i < c.length; i++) {
      chunks++;
      if (c[i].seq !== i) missing++;
      transit.push(Number(c[i].arrived - c[i].sent) / NS);
      if (i > 0) gaps.push(Number(c[i].arrived - c[i - 1].arrived - (c[i].sent - c[i - 1].sent)) / NS);
      if (i + 1 < c.length && c[i].arrived > c[i + 1].sent) held++;
    }
  }
  return { transit, gaps, ttfb, held, missing, chunks };
}

/**
 * `concurrency` workers each streaming back to back for `seconds`. Returns the finished streams and
 * counts of failures (non-2xx, errors, incomplete streams without [DONE]).
 */
async function runStreams({ url, path, body, headers, concurrency, seconds, abortEvery }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  const deadline = Date.now() + seconds * 1000;
  const streams = [];
  let non2xx = 0;
  let errors = 0;
  let n = 0;
  const worker = async () => {
    while (Date.now() < deadline) {
      const abortAfter = abortEvery && ++n % abortEvery === 0 ? 3 : undefined;
      const s = await streamOnce({ url, path, body, headers, agent, abortAfter });
      if (s.aborted) {
        streams.push(s);
        continue;
      }
      if (s.status && (s.status < 200 || s.status >= 300)) non2xx++;
      else if (s.error || !s.done) errors++;
      streams.push(s);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return { streams, non2xx, errors, aborted: streams.filter((s) => s.aborted).length };
}

/**
 * Opens `count` slow streams and keeps them open. `open` counts streams that have received their
 * first content chunk. Opening is paced: at most `batch` every `batchGapMs`, and no more than
 * `room()` (when given: how many more connections the server can take now without its listen
 * backlog overflowing, which would reset connections).
 */
function openSlowStreams({ url, path, body, headers, count, batch = 250, batchGapMs = 25, room }) {
  // No keep-alive and no socket cap: one connection per stream.
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const reqs = [];
  const state = { requested: count, started: 0, open: 0, non2xx: 0, errors: 0, ended: 0, closing: false, firstErrors: [], firstNon2xx: [] };
  const headersWithLength = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers };
  const openOne = () => {
    let opened = false;
    const req = http.request(url + path, { method: 'POST', agent, headers: headersWithLength }, (res) => {
      if (res.statusCode < 200 || res.statusCode >= 300) {
        state.non2xx++;
        // The first few error answers, for the report: a status alone does not say which part failed.
        if (state.firstNon2xx.length < 3) {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => state.firstNon2xx.push(`${res.statusCode} ${text.slice(0, 300)}`));
        } else res.resume();
        return;
      }
      res.on('data', () => {
        if (!opened) {
          opened = true;
          state.open++;
        }
      });
      res.on('end', () => {
        if (!state.closing) state.ended++;
      });
      res.on('error', () => undefined);
    });
    req.on('error', (err) => {
      if (state.closing) return;
      state.errors++;
      if (state.firstErrors.length < 3) state.firstErrors.push(err.message);
    });
    req.end(body);
    reqs.push(req);
    state.started++;
  };
  const opening = (async () => {
    while (state.started < count && !state.closing) {
      const n = Math.max(0, Math.min(batch, count - state.started, room ? room(state) : batch));
      for (let i = 0; i < n; i++) openOne();
      await new Promise((r) => setTimeout(r, batchGapMs));
    }
  })();
  return {
    state,
    opening,
    async closeAll() {
      state.closing = true;
      await opening;
      for (const r of reqs) r.destroy();
      agent.destroy();
    },
  };
}

module.exports = { splitEvents, streamOnce, runStreams, chunkTimings, openSlowStreams };
