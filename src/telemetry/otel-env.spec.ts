import { ConfigError } from '../config/schema';
import { readOtelEnv } from './otel-env';
import { clientTraceHeaders, withTraceHeaders } from './trace-context';

describe('readOtelEnv', () => {
  it('is off without an endpoint, with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none', () => {
    expect(readOtelEnv({})).toBeNull();
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
  });

  it('appends /v1/traces to the general endpoint and takes the traces endpoint as given; the traces variables win', () => {
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })!.url).toBe('http://c:4318/v1/traces');
    const c = readOtelEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/otlp/traces',
      OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '700',
      OTEL_EXPORTER_OTLP_HEADERS: 'a=1,b=two%20words',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'b=3',
    })!;
    expect(c.url).toBe('https://t.example/otlp/traces');
    expect(c.timeoutMs).toBe(700);
    expect(c.headers).toEqual({ a: '1', b: '3' });
  });

  it('defaults: parent-based always-on sampling, the SDK batch sizes, the service name', () => {
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toMatchObject({
      timeoutMs: 10_000,
      compression: 'none',
      serviceName: 'routing-gateway',
      sampler: { name: 'parentbased_always_on', ratio: 1 },
      batch: { maxQueueSize: 2048, maxExportBatchSize: 512, scheduleDelayMs: 5000, exportTimeoutMs: 30_000 },
    });
  });

  it('service name from OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES; sampler, ratio, batch and compression honoured', () => {
    const c = readOtelEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attrs,deployment.environment=prod',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500',
      OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
    })!;
    expect(c.serviceName).toBe('from-attrs');
    expect(c.resourceAttributes['deployment.environment']).toBe('prod');
    expect(c.sampler).toEqual({ name: 'parentbased_traceidratio', ratio: 0.25 });
    expect(c.batch.maxQueueSize).toBe(100);
    expect(c.batch.maxExportBatchSize).toBe(100);
    expect(c.compression).toBe('gzip');
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'gw', OTEL_RESOURCE_ATTRIBUTES: 'service.name=x' })!.serviceName).toBe('gw');
  });

  it('the encoding is protobuf unless http/json is asked for (the traces variable first); grpc and anything unknown stop start-up naming the variable', () => {
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })!.protocol).toBe('http/protobuf');
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' })!.protocol).toBe('http/protobuf');
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })!.protocol).toBe('http/json');
    expect(readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' })!.protocol).toBe('http/json');
    const bad = (env: Record<string, string>) => {
      try {
        readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', ...env });
      } catch (err) {
        return err instanceof ConfigError ? err.path : 'not a ConfigError';
      }
      return 'accepted';
    };
    expect(bad({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).toBe('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL');
    expect(bad({ OTEL_TRACES_EXPORTER: 'zipkin' })).toBe('OTEL_TRACES_EXPORTER');
    expect(bad({ OTEL_TRACES_SAMPLER: 'sometimes' })).toBe('OTEL_TRACES_SAMPLER');
    expect(bad({ OTEL_TRACES_SAMPLER_ARG: '2' })).toBe('OTEL_TRACES_SAMPLER_ARG');
    expect(bad({ OTEL_BSP_MAX_QUEUE_SIZE: '0' })).toBe('OTEL_BSP_MAX_QUEUE_SIZE');
    expect(bad({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://c' })).toBe('OTEL_EXPORTER_OTLP_ENDPOINT');
    expect(bad({ OTEL_EXPORTER_OTLP_HEADERS: '=secret' })).toBe('OTEL_EXPORTER_OTLP_HEADERS');
  });

  it('a bad headers list is refused without its value in the message (it usually carries a token)', () => {
    expect(() => readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'auth=%zzsecret-token' })).toThrow(/"auth"/);
    expect(() => readOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'auth=%zzsecret-token' })).not.toThrow(/secret-token/);
  });
});

describe('trace context pass-through', () => {
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  it('takes a well-formed traceparent (and its tracestate); refuses malformed, all-zero and version ff', () => {
    expect(clientTraceHeaders(tp, 'a=1')).toEqual({ traceparent: tp, tracestate: 'a=1' });
    expect(clientTraceHeaders(tp, ['a=1', 'b=2'])).toEqual({ traceparent: tp, tracestate: 'a=1,b=2' });
    expect(clientTraceHeaders(tp, 'x'.repeat(513))).toEqual({ traceparent: tp });
    expect(clientTraceHeaders(undefined, 'a=1')).toBeUndefined();
    for (const bad of [
      'garbage',
      tp.toUpperCase(),
      '00-00000000000000000000000000000000-b7ad6b7169203331-01',
      '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01',
      'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      `${tp}-extra`,
    ]) {
      expect(clientTraceHeaders(bad, undefined)).toBeUndefined();
    }
    // A later version may carry more fields: its first four are passed on as they came.
    expect(clientTraceHeaders(`01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more`, undefined)?.traceparent).toBe(
      '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more',
    );
  });

  it('adds the headers to an upstream request, or leaves it as it is', () => {
    expect(withTraceHeaders({ a: '1' }, undefined)).toEqual({ a: '1' });
    expect(withTraceHeaders({ a: '1' }, { traceparent: tp })).toEqual({ a: '1', traceparent: tp });
    expect(withTraceHeaders({}, { traceparent: tp, tracestate: 's=1' })).toEqual({ traceparent: tp, tracestate: 's=1' });
  });
});
