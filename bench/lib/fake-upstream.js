'use strict';
/**
 * The bench's zero-latency fake upstream: a plain node:http server (keep-alive) answering
 * OpenAI-shaped chat completions on any `POST …/chat/completions`. The body's `model` picks the
 * behaviour:
 *   bench-model  JSON answer at once; with `stream: true`, `chunks` SSE chunks then `[DONE]`, at once
 *   bench-delay  SSE only: one chunk every `delayMs` (the streaming-latency variant)
 *   bench-slow   SSE only: one chunk every `slowMs` (~1 s) for up to `slowChunks`, until the client
 *                goes (the memory variant: keeps thousands of streams open cheaply)
 * and OpenAI-shaped embeddings on any `POST …/embeddings` (the chaos soak's embeddings traffic).
 * Every streamed content delta is `<seq>:<send time>` where the send time is this process's
 * `process.hrtime.bigint()` (CLOCK_MONOTONIC, comparable across processes on one machine) taken
 * just before the write: the stream client matches each chunk it receives to its own send time.
 *
 * Run as a child process by the harness (`node bench/lib/fake-upstream.js '<json options>'`): it
 * prints `{"port":N}` on stdout once listening and exits on SIGTERM/SIGINT or when stdin closes.
 */
const http = require('node:http');

const DEFAULTS = { host: '127.0.0.1', port: 0, chunks: 20, delayMs: 10, slowMs: 1000, slowChunks: 600 };

/** ~120 tokens of answer: the size of a short real completion. */
const ANSWER =
  'Certainly. Here is a short answer to your question, written so that the response has a realistic size for a ' +
  'chat completion: a few sentences of plain text, some punctuation, and nothing that needs escaping. The gateway ' +
  'parses it, maps it to its own shape and serialises it again, which is the work this benchmark measures. ' +
  'It ends here, with a final sentence of ordinary length.';

function createFakeUpstream(options = {}) {
  const o = { ...DEFAULTS, ...options };
  const created = 1755000000;
  let seq = 0;
  const usage = { prompt_tokens: 42, completion_tokens: 96, total_tokens: 138 };
  const jsonBody = (model) =>
    JSON.stringify({
      id: `chatcmpl-bench${++seq}`,
      object: 'chat.completion',
      created,
      model,
      system_fingerprint: 'fp_bench',
      choices: [{ index: 0, message: { role: 'assistant', content: ANSWER, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage,
    });
  const chunkHead = (id, model) => `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"${model}","choices":[`;
  const stats = { requests: 0, streams: 0, openStreams: 0, chunks: 0 };

  function contentChunk(id, model, i) {
    const delta = i === 0 ? `{"role":"assistant","content":"` : `{"content":"`;
    const sent = process.hrtime.bigint();
    return `${chunkHead(id, model)}{"index":0,"delta":${delta}${i}:${sent}"},"logprobs":null,"finish_reason":null}]}\n\n`;
  }
  const finishChunk = (id, model) =>
    `${chunkHead(id, model)}{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":${JSON.stringify(usage)}}\n\n` + 'data: [DONE]\n\n';

  function stream(req, res, model, count, everyMs) {
    stats.streams++;
    stats.openStreams++;
    const id = `chatcmpl-bench${++seq}`;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let i = 0;
    let timer;
    let closed = false;
    const end = () => {
      if (closed) return;
      closed = true;
      stats.openStreams--;
      clearTimeout(timer);
    };
    res.on('close', end);
    const next = () => {
      if (closed) return;
      stats.chunks++;
      res.write(contentChunk(id, model, i++));
      if (i >= count) {
        res.end(finishChunk(id, model));
        end();
      } else if (everyMs > 0) timer = setTimeout(next, everyMs);
      else next();
    };
    next();
  }

  /**
   * OpenAI-shaped embeddings (the chaos soak's embeddings traffic): `dimensions` floats per input
   * (default 8), derived from the input's characters so equal inputs get equal vectors.
   */
  function embeddings(res, body) {
    const inputs = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) ? body.input : null;
    if (!inputs || inputs.length === 0 || inputs.some((s) => typeof s !== 'string')) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"bad request","type":"invalid_request_error","param":"input","code":null}}');
      return;
    }
    const dims = Number.isInteger(body.dimensions) && body.dimensions > 0 && body.dimensions <= 4096 ? body.dimensions : 8;
    let tokens = 0;
    const data = inputs.map((s, index) => {
      tokens += Math.ceil(s.length / 4);
      const embedding = Array.from({ length: dims }, (_, d) => ((s.charCodeAt(d % Math.max(1, s.length)) || 0) % 97) / 97 - 0.5);
      return { object: 'embedding', index, embedding };
    });
    const text = JSON.stringify({ object: 'list', data, model: typeof body.model === 'string' ? body.model : 'bench-embed', usage: { prompt_tokens: tokens, total_tokens: tokens } });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  const server = http.createServer((req, res) => {
    stats.requests++;
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8'));
      } catch {
        body = null;
      }
      if (req.method === 'POST' && req.url.endsWith('/embeddings') && body) return embeddings(res, body);
      if (req.method !== 'POST' || !req.url.endsWith('/chat/completions') || !body || !Array.isArray(body.messages)) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":null}}');
        return;
      }
      const model = typeof body.model === 'string' ? body.model : 'bench-model';
      if (model === 'bench-slow') return stream(req, res, model, o.slowChunks, o.slowMs);
      if (model === 'bench-delay') return stream(req, res, model, o.chunks, o.delayMs);
      if (body.stream === true) return stream(req, res, model, o.chunks, 0);
      const text = jsonBody(model);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  // Keep-alive as long as the gateway's own pools keep their sockets; no per-request timeout.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 121_000;
  server.requestTimeout = 0;
  server.maxHeadersCount = 0;

  return {
    server,
    stats,
    listen: () =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(o.port, o.host, 1024 * 16, () => resolve(server.address().port));
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

module.exports = { createFakeUpstream, ANSWER };

if (require.main === module) {
  const fake = createFakeUpstream(process.argv[2] ? JSON.parse(process.argv[2]) : {});
  fake.listen().then((port) => process.stdout.write(`${JSON.stringify({ port })}\n`));
  const stop = () => fake.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Dies with the harness: stdin is a pipe from it.
  process.stdin.on('end', stop).on('error', stop).resume();
  process.on('message', (m) => {
    if (m === 'stats') process.send({ stats: fake.stats });
  });
}
