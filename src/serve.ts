import { createGatewayApp, appLogger, installGracefulShutdown } from './bootstrap';
import { AppConfig } from './config/app-config';

/** Starts the HTTP server; shared by `npm start` (main.ts) and `gateway serve`. */
export async function serve(config: AppConfig): Promise<void> {
  const started = process.hrtime.bigint();
  const logger = appLogger(config);
  const { app, demoKey } = await createGatewayApp(config, logger);
  const server = app.getHttpServer();
  // Longer than common load balancers' idle timeout, so the balancer closes first (no reset races).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
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
