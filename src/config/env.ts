import { OtelConfig, readOtelEnv } from '../telemetry/otel-env';
import { Secret } from './secret';
import { ConfigError } from './schema';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The environment variables (README "Environment"), read once. `process.env` is read in src/config only. */
export interface EnvConfig {
  port: number;
  host: string;
  configPath: string;
  dataDir: string;
  databaseUrl?: string;
  redisUrl?: string;
  vectorDatabaseUrl?: string;
  keyPepper?: Secret;
  logLevel: LogLevel;
  /** How long SIGTERM waits for in-flight requests and streams before exiting. */
  drainTimeoutMs: number;
  /** OpenTelemetry traces from the standard `OTEL_*` variables; null = off (README "OpenTelemetry"). */
  otel: OtelConfig | null;
}

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());

function intVar(env: Record<string, string | undefined>, name: string, fallback: number, min: number, max: number): number {
  const v = nonEmpty(env[name]);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < min || n > max) throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${v}"`);
  return n;
}

/**
 * What `gateway export` reads (README "Decisions export"): where the analytics store is and the log
 * level. It hashes no key, so unlike the server it needs no GATEWAY_KEY_PEPPER beside DATABASE_URL.
 */
export function loadStoreEnv(env: Readonly<Record<string, string | undefined>> = process.env): Pick<EnvConfig, 'databaseUrl' | 'dataDir' | 'logLevel'> {
  const logLevel = (nonEmpty(env.LOG_LEVEL) ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  return Object.freeze({ databaseUrl: nonEmpty(env.DATABASE_URL), dataDir: nonEmpty(env.GATEWAY_DATA_DIR) ?? '.gateway-data', logLevel });
}

export function loadEnv(env: Readonly<Record<string, string | undefined>>): EnvConfig {
  const logLevel = (nonEmpty(env.LOG_LEVEL) ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const databaseUrl = nonEmpty(env.DATABASE_URL);
  const pepper = nonEmpty(env.GATEWAY_KEY_PEPPER);
  if (databaseUrl && !pepper) {
    throw new ConfigError('GATEWAY_KEY_PEPPER', 'is required when DATABASE_URL is set (replicas must hash API keys alike)');
  }
  return Object.freeze({
    port: intVar(env, 'PORT', 8080, 0, 65535),
    host: nonEmpty(env.HOST) ?? '127.0.0.1',
    configPath: nonEmpty(env.GATEWAY_CONFIG) ?? 'config/gateway.yaml',
    dataDir: nonEmpty(env.GATEWAY_DATA_DIR) ?? '.gateway-data',
    databaseUrl,
    redisUrl: nonEmpty(env.REDIS_URL),
    vectorDatabaseUrl: nonEmpty(env.VECTOR_DATABASE_URL) ?? databaseUrl,
    keyPepper: pepper === undefined ? undefined : new Secret(pepper),
    logLevel,
    drainTimeoutMs: intVar(env, 'GATEWAY_DRAIN_TIMEOUT_MS', 10_000, 0, 600_000),
    otel: readOtelEnv(env),
  });
}
