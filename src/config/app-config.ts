import { readFileSync } from 'node:fs';
import { EnvConfig, loadEnv } from './env';
import { GatewayConfig, loadGatewayConfig } from './gateway-config';
import { ConfigError } from './schema';

/** The DI token carrying the whole validated configuration. */
export class AppConfig {
  constructor(
    readonly env: EnvConfig,
    readonly gateway: GatewayConfig,
  ) {}
}

/** Reads the environment and the gateway file named by it. Throws ConfigError with a path. */
export function readAppConfig(env: Readonly<Record<string, string | undefined>> = process.env): AppConfig {
  const envConfig = loadEnv(env);
  return new AppConfig(envConfig, readGatewayFile(envConfig.configPath, env));
}

export function readGatewayFile(path: string, env: Readonly<Record<string, string | undefined>> = process.env): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError('', `cannot read config file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return loadGatewayConfig(text, env);
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(err.path, `${err.detail} (in ${path})`);
    throw err;
  }
}
