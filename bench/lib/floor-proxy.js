'use strict';
/**
 * A reference proxy for `npm run bench:floor`: the least a Node.js gateway can do per request — read
 * the client's JSON body, parse it, POST it re-serialised to the upstream over a keep-alive agent,
 * read and parse the answer, write it back re-serialised (a stream: each event parsed and written
 * re-serialised as it comes). `node floor-proxy.js <kind> <upstreamPort>`
 * with kind `node` (plain node:http server), `express` (the same handler as an Express route) or
 * `nest` (as a NestJS controller on Express, see nest()).
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

/** Everything after the client's body is parsed: the same for every kind. */
async function respond(request, res) {
  if (request.stream === true) return stream(JSON.stringify(request), res);
  const answer = JSON.stringify(JSON.parse(await upstream(JSON.stringify(request))));
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
  res.end(answer);
}

const handle = async (req, res) => respond(JSON.parse(await readBody(req)), res);

const listening = function () {
  process.stdout.write(`${JSON.stringify({ port: this.address().port })}\n`);
};
/** Express's per-response extras, off as the gateway turns them off (src/bootstrap.ts). */
const plain = (app) => {
  app.disable('x-powered-by');
  app.set('etag', false);
  return app;
};

if (kind === 'express') {
  const app = plain(require('express')());
  app.post('/v1/chat/completions', (req, res) => void handle(req, res).catch(() => res.destroy()));
  app.listen(0, '127.0.0.1', listening);
} else if (kind === 'nest') {
  nest().catch((err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    process.exit(1);
  });
} else {
  http.createServer((req, res) => void handle(req, res).catch(() => res.destroy())).listen(0, '127.0.0.1', listening);
}
/**
 * The same handler as a NestJS controller on Express, used the way the gateway uses the framework:
 * a middleware on every route, a global guard and exception filter, the body read and parsed by a
 * parameter decorator's pipe, `@Res()` written directly. What Nest itself costs per request over the
 * Express kind. Plain JavaScript, so the decorators are applied by hand.
 */
async function nest() {
  require('reflect-metadata');
  const { Module, Controller, Post, Res, Injectable, Catch, createParamDecorator } = require('@nestjs/common');
  const { NestFactory, APP_GUARD, APP_FILTER } = require('@nestjs/core');
  class PassMiddleware {
    use(_req, _res, next) {
      next();
    }
  }
  class AllowGuard {
    canActivate() {
      return true;
    }
  }
  class DestroyFilter {
    catch(_err, host) {
      host.switchToHttp().getResponse().destroy();
    }
  }
  class JsonBodyPipe {
    async transform(req) {
      return JSON.parse(await readBody(req));
    }
  }
  const RequestParam = createParamDecorator((_data, ctx) => ctx.switchToHttp().getRequest());
  class ChatController {
    complete(request, res) {
      return respond(request, res);
    }
  }
  for (const c of [PassMiddleware, AllowGuard, DestroyFilter]) Injectable()(c);
  Catch()(DestroyFilter);
  RequestParam(undefined, new JsonBodyPipe())(ChatController.prototype, 'complete', 0);
  Res()(ChatController.prototype, 'complete', 1);
  Post('completions')(ChatController.prototype, 'complete', Object.getOwnPropertyDescriptor(ChatController.prototype, 'complete'));
  Controller('v1/chat')(ChatController);
  class AppModule {
    configure(consumer) {
      consumer.apply(PassMiddleware).forRoutes('*path');
    }
  }
  Module({
    controllers: [ChatController],
    providers: [AllowGuard, DestroyFilter, { provide: APP_GUARD, useExisting: AllowGuard }, { provide: APP_FILTER, useExisting: DestroyFilter }],
  })(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false, bodyParser: false });
  plain(app.getHttpAdapter().getInstance());
  await app.listen(0, '127.0.0.1');
  listening.call(app.getHttpServer());
}

process.stdin.on('close', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
