import type { Server } from 'node:http';
import { createGatewayApp, appLogger, installGracefulShutdown } from './bootstrap';
import { AppConfig } from './config/app-config';

/** Starts the HTTP server; shared by `npm start` (main.ts) and `gateway serve`. */
export async function serve(config: AppConfig): Promise<void> {
  const started = process.hrtime.bigint();
  const logger = appLogger(config);
  const { app, demoKey } = await createGatewayApp(config, logger);
  const server: Server = app.getHttpServer();
  // Longer than common load balancers' idle timeout, so the balancer closes first (no reset races).
  server.keepAliveTimeout = 65_000;
  // A client that trickles its headers (slow-loris) or never finishes its body gets Node's 408 and
  // loses the socket instead of holding it: headers within 10 s, the whole request body within 60 s
  // (streamed answers are not bounded by this). An idle keep-alive connection is not a request in
  // progress, so these do not cut it. The timeouts are checked every second, not every 30 s.
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  // The constructor option's public field, read when the server starts listening (not in @types/node 20).
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = 1_000;
  await app.listen(config.env.port, config.env.host);
  installGracefulShutdown(app, config, logger);
  const url = await app.getUrl();
  logger.pino.info({ url, startup_ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6) }, 'gateway listening');
  if (demoKey) {
    // Printed once, to the terminal only (not a log line): the demo key is stored hashed.
    process.stdout.write(
      `\n  Demo organisation created. Its API key (shown once, keep it):\n\n    ${demoKey}\n\n` +
        `  Try: curl ${url.replace('[::1]', 'localhost')}/v1/chat/completions -H "Authorization: Bearer ${demoKey}" ...\n\n`,
    );
  }
}
