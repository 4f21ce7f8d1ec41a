'use strict';
/**
 * A reference proxy for `npm run bench:floor`: the least a Node.js gateway can do per request — read
 * the client's JSON body, parse it, POST it re-serialised to the upstream over a keep-alive agent,
 * read and parse the answer, write it back re-serialised (a stream: each event parsed and written
 * re-serialised as it comes). `node floor-proxy.js <kind> <upstreamPort>`
 * with kind `node` (plain node:http server) or `express` (the same handler as an Express route).
 * Prints `{"port":N}` once listening.
 */
const http = require('node:http');
const { splitEvents } = require('./streams');

const [kind, upstreamPort] = [process.argv[2], Number(process.argv[3])];
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo' });

const readBody = (stream) =>
  new Promise((resolve, reject) => {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    stream.on('error', reject);
  });

/** A POST of `body` to the fake upstream over the keep-alive agent; `onAnswer` gets the response. */
function post(body, onAnswer, reject) {
  const req = http.request(
    { host: '127.0.0.1', port: upstreamPort, path: '/v1/chat/completions', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
    onAnswer,
  );
  req.on('error', reject);
  req.end(body);
  return req;
}

const upstream = (body) => new Promise((resolve, reject) => post(body, (res) => readBody(res).then(resolve, reject), reject));

/**
 * A stream: the least a gateway does per event — split the upstream's SSE into events, parse each
 * event's JSON and write it re-serialised as its own event (the socket's Nagle off, as the gateway's).
 */
function stream(body, res) {
  return new Promise((resolve, reject) => {
    const up = post(
      body,
      (answer) => {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
        res.socket.setNoDelay(true);
        answer.setEncoding('utf8');
        let rest = '';
        answer.on('data', (text) => {
          let events;
          [events, rest] = splitEvents(rest + text);
          for (const event of events) {
            if (!event.startsWith('data: ')) continue;
            const data = event.slice(6);
            res.write(data === '[DONE]' ? 'data: [DONE]\n\n' : `data: ${JSON.stringify(JSON.parse(data))}\n\n`);
          }
        });
        answer.on('end', () => {
          res.end();
          resolve();
        });
        answer.on('error', reject);
      },
      reject,
    );
    res.on('close', () => up.destroy());
  });
}

async function handle(req, res) {
  const request = JSON.parse(await readBody(req));
  if (request.stream === true) return stream(JSON.stringify(request), res);
  const answer = JSON.stringify(JSON.parse(await upstream(JSON.stringify(request))));
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
  res.end(answer);
}

const listening = function () {
  process.stdout.write(`${JSON.stringify({ port: this.address().port })}\n`);
};
if (kind === 'express') {
  const app = require('express')();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.post('/v1/chat/completions', (req, res) => void handle(req, res).catch(() => res.destroy()));
  app.listen(0, '127.0.0.1', listening);
} else {
  http.createServer((req, res) => void handle(req, res).catch(() => res.destroy())).listen(0, '127.0.0.1', listening);
}
process.stdin.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
