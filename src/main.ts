import 'reflect-metadata';
import { readAppConfig } from './config/app-config';
import { ConfigError } from './config/schema';
import { serve } from './serve';

/** `npm start`: the gateway on the embedded default unless DATABASE_URL / REDIS_URL say otherwise. */
async function main(): Promise<void> {
  let config;
  try {
    config = readAppConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`gateway: config error: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  await serve(config);
}

main().catch((err: Error) => {
  process.stderr.write(`gateway: failed to start: ${err.message}\n`);
  process.exit(1);
});
