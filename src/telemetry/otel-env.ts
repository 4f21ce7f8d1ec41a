import { ConfigError } from '../config/schema';

/**
 * OpenTelemetry tracing as the standard `OTEL_*` variables configure it (README "OpenTelemetry",
 * docs/operations.md "OpenTelemetry traces"). Read once with the rest of the environment, from the
 * record given (not process.env), so a test can run a gateway with tracing on beside one with it off.
 */
export interface OtelConfig {
  /** Where spans are POSTed (OTLP/HTTP). */
  url: string;
  /** Extra request headers (a collector's or vendor's auth). Never logged. */
  headers: Record<string, string>;
  /** One export request's timeout (ms). */
  timeoutMs: number;
  compression: 'gzip' | 'none';
  /** OTLP/HTTP's encoding: protobuf unless JSON is asked for (the OTLP exporter's default). */
  protocol: 'http/protobuf' | 'http/json';
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: { name: SamplerName; ratio: number };
  /** The batch span processor: spans held at most (beyond: dropped and counted), per export, delay and timeout of one export. */
  batch: { maxQueueSize: number; maxExportBatchSize: number; scheduleDelayMs: number; exportTimeoutMs: number };
}

export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type SamplerName = (typeof SAMPLERS)[number];

type Env = Readonly<Record<string, string | undefined>>;

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());

/** The signal-specific variable (`OTEL_EXPORTER_OTLP_TRACES_*`) wins over the general one (`OTEL_EXPORTER_OTLP_*`). */
function otlpVar(env: Env, suffix: string): { name: string; value: string } | undefined {
  for (const name of [`OTEL_EXPORTER_OTLP_TRACES_${suffix}`, `OTEL_EXPORTER_OTLP_${suffix}`]) {
    const value = nonEmpty(env[name]);
    if (value !== undefined) return { name, value };
  }
  return undefined;
}

function intVar(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = nonEmpty(env[name]);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < min || n > max) throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${v}"`);
  return n;
}

/** `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage form the OTEL_* lists use). */
function keyValueList(name: string, text: string | undefined): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  if (text === undefined) return out;
  for (const part of text.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const key = eq > 0 ? part.slice(0, eq).trim() : '';
    // The value is left out of the message: a headers list usually carries a token.
    if (key === '') throw new ConfigError(name, 'must be a comma-separated list of key=value pairs');
    let value: string;
    try {
      value = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      throw new ConfigError(name, `the value of "${key}" is not valid percent-encoding`);
    }
    out[key] = value;
  }
  return out;
}

/** `OTEL_EXPORTER_OTLP_ENDPOINT` is a base: the traces path is appended (the signal-specific variable is used as given). */
function tracesUrl(env: Env): string | undefined {
  const specific = nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const base = nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const url = specific ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`);
  if (url === undefined) return undefined;
  const name = specific ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(name, 'must be an http:// or https:// URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ConfigError(name, 'must be an http:// or https:// URL');
  return url;
}

/** The tracing configuration, or null when tracing is off: no endpoint, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. */
export function readOtelEnv(env: Env): OtelConfig | null {
  if (nonEmpty(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return null;
  const exporter = nonEmpty(env.OTEL_TRACES_EXPORTER)?.toLowerCase() ?? 'otlp';
  if (exporter === 'none') return null;
  if (exporter !== 'otlp') throw new ConfigError('OTEL_TRACES_EXPORTER', `must be otlp or none, got "${exporter}"`);
  const url = tracesUrl(env);
  if (url === undefined) return null;

  // Only OTLP/HTTP is spoken, in either encoding: protobuf by default, as the OTLP exporter
  // specification has it (half the bytes of JSON, and half its CPU per span to encode).
  const protocol = otlpVar(env, 'PROTOCOL');
  if (protocol && protocol.value === 'grpc') throw new ConfigError(protocol.name, 'grpc is not supported: use http/protobuf or http/json and the collector\'s OTLP/HTTP port');
  if (protocol && protocol.value !== 'http/json' && protocol.value !== 'http/protobuf') throw new ConfigError(protocol.name, `must be http/json or http/protobuf, got "${protocol.value}"`);

  const compression = otlpVar(env, 'COMPRESSION')?.value ?? 'none';
  if (compression !== 'gzip' && compression !== 'none') throw new ConfigError('OTEL_EXPORTER_OTLP_COMPRESSION', `must be gzip or none, got "${compression}"`);

  const samplerName = (nonEmpty(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on') as SamplerName;
  if (!SAMPLERS.includes(samplerName)) throw new ConfigError('OTEL_TRACES_SAMPLER', `must be one of ${SAMPLERS.join(', ')}, got "${samplerName}"`);
  const ratioText = nonEmpty(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = ratioText === undefined ? 1 : Number(ratioText);
  if (!(ratio >= 0 && ratio <= 1)) throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a number from 0 to 1, got "${ratioText}"`);

  const maxQueueSize = intVar(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, 1_000_000);
  const timeout = otlpVar(env, 'TIMEOUT');
  const resourceAttributes = keyValueList('OTEL_RESOURCE_ATTRIBUTES', nonEmpty(env.OTEL_RESOURCE_ATTRIBUTES));
  return {
    url,
    headers: { ...keyValueList('OTEL_EXPORTER_OTLP_HEADERS', nonEmpty(env.OTEL_EXPORTER_OTLP_HEADERS)), ...keyValueList('OTEL_EXPORTER_OTLP_TRACES_HEADERS', nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)) },
    timeoutMs: timeout ? intVar({ [timeout.name]: timeout.value }, timeout.name, 10_000, 1, 600_000) : 10_000,
    compression,
    protocol: protocol?.value === 'http/json' ? 'http/json' : 'http/protobuf',
    serviceName: nonEmpty(env.OTEL_SERVICE_NAME) ?? resourceAttributes['service.name'] ?? 'routing-gateway',
    resourceAttributes,
    sampler: { name: samplerName, ratio },
    batch: {
      maxQueueSize,
      // More per export than can be queued is pointless; the SDK would lower it itself, with a warning.
      maxExportBatchSize: Math.min(maxQueueSize, intVar(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, 1_000_000)),
      scheduleDelayMs: intVar(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 0, 600_000),
      exportTimeoutMs: intVar(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, 1, 600_000),
    },
  };
}
