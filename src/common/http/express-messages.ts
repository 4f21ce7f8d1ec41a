import type { NestApplicationOptions } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Express } from 'express';
import * as http from 'node:http';

type MessageClass = new (...args: never[]) => object;

/**
 * A constructor of `base`'s objects whose prototype is `proto`: Node's `http.Server` makes each
 * request and response with the classes it is given. Undefined when `base` is an ES class, which
 * cannot be called on an object it did not make (`IncomingMessage` and `ServerResponse` are plain
 * constructor functions in the Node.js versions the gateway runs on; a later one changing that gets
 * the default server, as before).
 */
export function madeWithPrototype(base: MessageClass, proto: object): MessageClass | undefined {
  if (/^class\b/.test(Function.prototype.toString.call(base))) return undefined;
  const construct = base as unknown as (...args: unknown[]) => void;
  function Message(this: object, ...args: unknown[]) {
    construct.apply(this, args);
  }
  Message.prototype = proto;
  return Message as unknown as MessageClass;
}

/**
 * The `http.createServer` options under which Express's request and response objects are made with
 * Express's prototypes from the start, rather than given them per request.
 */
export function expressMessageClasses(app: Express): http.ServerOptions | undefined {
  const IncomingMessage = madeWithPrototype(http.IncomingMessage, app.request);
  const ServerResponse = madeWithPrototype(http.ServerResponse, app.response);
  if (!IncomingMessage || !ServerResponse) return undefined;
  return { IncomingMessage, ServerResponse } as unknown as http.ServerOptions;
}

/**
 * NestJS's Express adapter, with one difference: its HTTP server makes requests and responses whose
 * prototypes already are Express's (docs/architecture.md "Performance budget"). Express's
 * `app.handle` sets them on every request (`Object.setPrototypeOf(req, app.request)`, the same for
 * `res`); on an object Node.js just made, that gives the object a map of its own and, measured, kept
 * each request's objects alive across young-generation collections: a bare Express app promoted
 * ≈ 8 KB of every request to the old generation, the same app on this server ≈ 0, and the gateway
 * ≈ 18 KB of its ≈ 100 KB. When the prototype already is the one asked for, `setPrototypeOf` does
 * nothing. HTTPS and `forceCloseConnections` (neither used by the gateway) keep Nest's own server.
 */
export class GatewayExpressAdapter extends ExpressAdapter {
  override initHttpServer(options: NestApplicationOptions): void {
    const app = this.getInstance<Express>();
    const classes = options?.httpsOptions || options?.forceCloseConnections ? undefined : expressMessageClasses(app);
    if (!classes) return super.initHttpServer(options);
    this.setHttpServer(http.createServer(classes, app));
  }
}
