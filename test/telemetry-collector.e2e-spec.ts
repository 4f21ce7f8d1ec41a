import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { closedPort } from './support/kit/net';
import { OtlpReceiver } from './support/otlp-receiver';

/**
 * A collector that is dead (its port closed) or frozen (accepts, never answers) costs requests
 * nothing and holds memory to the bounded queue: every request is served, spans beyond the queue
 * are dropped and counted in /metrics (docs/operations.md "OpenTelemetry traces"), never held.
 * Asserted by counts, not timings. And shutdown exports what is still queued.
 */
const REQUESTS = 120;
/** Each test starts its own gateway (migrations included), which takes seconds on a busy machine. */
const TEST_MS = 90_000;
const QUEUE = 16;
/** The mock provider's chat: one server span and one upstream-call span per request. */
const SPANS_PER_REQUEST = 2;

const batchEnv = (url: string, extra: Record<string, string> = {}) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: url,
  OTEL_BSP_MAX_QUEUE_SIZE: String(QUEUE),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '8',
  OTEL_BSP_SCHEDULE_DELAY: '10',
  ...extra,
});

async function chat(t: TestApp): Promise<number> {
  const res = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.text();
  return res.status;
}

/** REQUESTS chat requests, 10 at a time; the statuses they got. */
async function load(t: TestApp): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < REQUESTS; i += 10) statuses.push(...(await Promise.all(Array.from({ length: 10 }, () => chat(t)))));
  return statuses;
}

async function otelMetrics(t: TestApp): Promise<{ queueFull: number; exportFailed: number; exported: number; depth: number }> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const get = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
  return {
    queueFull: get(/^gateway_otel_spans_dropped_total\{reason="queue_full"\} (\d+)$/m),
    exportFailed: get(/^gateway_otel_spans_dropped_total\{reason="export_failed"\} (\d+)$/m),
    exported: get(/^gateway_otel_spans_exported_total (\d+)$/m),
    depth: get(/^gateway_otel_span_queue_depth (\d+)$/m),
  };
}

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

it('dead collector (port closed): every request served; every span accounted for as dropped, none held', async () => {
  const t = await startTestApp({ env: batchEnv(`http://127.0.0.1:${await closedPort()}`, { OTEL_EXPORTER_OTLP_TIMEOUT: '300' }) });
  try {
    const statuses = await load(t);
    expect(statuses.filter((s) => s === 200)).toHaveLength(REQUESTS);
    expect((await otelMetrics(t)).depth).toBeLessThanOrEqual(QUEUE);
    // Once the exports in flight have failed, nothing is held: each span was dropped (queue full) or failed to export.
    const m = await until(() => otelMetrics(t), (v) => v.queueFull + v.exportFailed === REQUESTS * SPANS_PER_REQUEST);
    expect(m).toMatchObject({ exported: 0, depth: 0 });
    expect(m.queueFull + m.exportFailed).toBe(REQUESTS * SPANS_PER_REQUEST);
    expect(m.exportFailed).toBeGreaterThan(0);
    expect(t.logs.some((l) => l.includes('"topic":"otel-export_failed"'))).toBe(true);
  } finally {
    await t.close();
  }
}, TEST_MS);

it('frozen collector (accepts, never answers): every request served; one export in flight, the queue bounded, the rest dropped and counted', async () => {
  const frozen = await new OtlpReceiver().start('frozen');
  // Timeouts longer than the test: the first export hangs throughout.
  const t = await startTestApp({ env: batchEnv(frozen.url, { OTEL_EXPORTER_OTLP_TIMEOUT: '15000', OTEL_BSP_EXPORT_TIMEOUT: '15000' }) });
  try {
    const statuses = await load(t);
    expect(statuses.filter((s) => s === 200)).toHaveLength(REQUESTS);
    const m = await otelMetrics(t);
    expect(m.depth).toBeLessThanOrEqual(QUEUE);
    expect(m.queueFull).toBeGreaterThan(0);
    expect(m).toMatchObject({ exported: 0, exportFailed: 0 });
    // What the gateway holds for the collector: the queue and the one batch (at most 8 spans) it is waiting on.
    expect(frozen.requests).toBe(1);
    expect(m.queueFull + m.depth).toBeGreaterThanOrEqual(REQUESTS * SPANS_PER_REQUEST - 8);
    expect(m.queueFull + m.depth).toBeLessThan(REQUESTS * SPANS_PER_REQUEST);
  } finally {
    await t.close();
    await frozen.stop();
  }
}, TEST_MS);

it('shutdown exports the spans still queued (within the drain bound)', async () => {
  const receiver = await new OtlpReceiver().start();
  // A schedule delay longer than the test: only shutdown's flush can send these.
  const t = await startTestApp({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '600000' } });
  try {
    for (let i = 0; i < 3; i++) expect(await chat(t)).toBe(200);
    expect((await otelMetrics(t)).depth).toBe(3 * SPANS_PER_REQUEST);
    expect(receiver.spans).toHaveLength(0);
  } finally {
    await t.close();
  }
  expect(receiver.spans.filter((s) => s.kind === 2)).toHaveLength(3);
  expect(receiver.spans).toHaveLength(3 * SPANS_PER_REQUEST);
  await receiver.stop();
}, TEST_MS);
