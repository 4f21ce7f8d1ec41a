'use strict';
/**
 * The bench's OpenTelemetry collector stand-in for `--otel`: an OTLP/HTTP traces receiver
 * (`POST /v1/traces`, in either encoding: protobuf, the gateway's default, or JSON) that answers
 * 200 at once and counts export requests, spans and bytes. It runs in its own process, so decoding
 * the batches costs the gateway nothing: what the bench measures is the gateway's own cost of
 * building and exporting them.
 *
 * As a child (`node bench/lib/otlp-sink.js`) it prints `{"port":N}` once listening, answers the
 * `stats` IPC message, and exits on SIGTERM/SIGINT. `startOtlpSink()` spawns it.
 */
const http = require('node:http');
const path = require('node:path');
const { countSpans } = require('./otlp-protobuf');

function serve() {
  const stats = { requests: 0, spans: 0, bytes: 0, bad: 0 };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      stats.requests++;
      stats.bytes += body.length;
      const json = String(req.headers['content-type']).startsWith('application/json');
      try {
        if (json) for (const rs of JSON.parse(body.toString('utf8')).resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) stats.spans += (ss.spans ?? []).length;
        else stats.spans += countSpans(body);
      } catch {
        stats.bad++;
      }
      if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n'));
  process.on('message', (m) => m === 'stats' && process.send({ stats }));
  for (const s of ['SIGTERM', 'SIGINT']) process.on(s, () => process.exit(0));
}

/** Spawns the sink; resolves with its url, a stats() query and stop(). */
function startOtlpSink() {
  const procs = require('./procs');
  const child = procs.spawnWithFds([process.execPath, '-r', path.join(__dirname, 'orphan-guard.js'), __filename], { cwd: procs.ROOT, stdio: ['pipe', 'pipe', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (s) => {
      out += s;
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      child.stdout.off('data', onData);
      const { port } = JSON.parse(out.slice(0, nl));
      resolve({
        pid: child.pid,
        url: `http://127.0.0.1:${port}`,
        stats: () =>
          new Promise((res) => {
            child.once('message', (m) => res(m.stats));
            child.send('stats');
          }),
        stop: () => procs.stopChild(child),
      });
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.once('exit', (code) => reject(new Error(`OTLP sink exited (${code}) before listening`)));
  });
}

if (require.main === module) serve();

module.exports = { startOtlpSink };
