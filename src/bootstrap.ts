import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Server } from 'node:http';
import { AppModule } from './app.module';
import { GatewayExpressAdapter } from './common/http/express-messages';
import { RequestContextMiddleware } from './common/http/request-context.middleware';
import { DrainState } from './common/lifecycle/drain-state';
import { AppLogger, createLogger } from './common/logging/logger';
import { NestPinoLogger } from './common/logging/nest-logger';
import { AppConfig } from './config/app-config';
import { TenancyService } from './tenancy/tenancy.service';

export interface GatewayApp {
  app: NestExpressApplication;
  /** Set only on the first start of the embedded default with no organisation configured. */
  demoKey?: string;
}

export function appLogger(config: AppConfig): AppLogger {
  return { pino: createLogger(config.env.logLevel) };
}

/** Builds and initialises the gateway (stores connected and migrated, tenants seeded), not yet listening. */
export async function createGatewayApp(config: AppConfig, logger: AppLogger = appLogger(config)): Promise<GatewayApp> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(config, logger), new GatewayExpressAdapter(), {
    // Bodies are parsed per route after the guards (`@JsonBody`, common/http/json-body.decorator.ts), never globally.
    bodyParser: false,
    logger: new NestPinoLogger(logger.pino),
    abortOnError: false,
  });
  return prepareApp(app, config);
}

/** Express settings, init (stores connect and migrate), then tenants seeded from config. */
export async function prepareApp(app: NestExpressApplication, config: AppConfig): Promise<GatewayApp> {
  app.disable('x-powered-by');
  app.set('etag', false);
  /*
   * The request context (id, draining, access line, metrics) runs for every request, first: mounted
   * at Express's root it needs no path match, where Nest's consumer for `*path` matched a wildcard
   * and kept each request in a WeakSet (docs/architecture.md "Performance budget"). It never throws;
   * if it did, Express would hand the error to Nest's handler, which answers with the error catalogue.
   */
  const context = app.get(RequestContextMiddleware);
  app.use(context.use.bind(context));
  await app.init();
  const { demoKey } = await app.get(TenancyService).seed(config.gateway, { demo: !config.env.databaseUrl });
  return { app, demoKey };
}

/**
 * SIGTERM/SIGINT (docs/architecture.md "Graceful shutdown"): readiness turns 503, the listener stops accepting, in-flight
 * requests and streams finish up to the drain timeout, then the stores close and the process exits 0.
 */
export function installGracefulShutdown(app: INestApplication, config: AppConfig, logger: AppLogger): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const drain = app.get(DrainState);
    drain.startDraining();
    logger.pino.info({ signal, in_flight: drain.active }, 'draining');
    const server = app.getHttpServer() as Server;
    server.close();
    server.closeIdleConnections?.();
    const clean = await drain.idle(config.env.drainTimeoutMs);
    if (!clean) logger.pino.warn({ in_flight: drain.active }, 'drain timeout reached; closing remaining connections');
    server.closeAllConnections?.();
    await app.close();
    logger.pino.info('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}
