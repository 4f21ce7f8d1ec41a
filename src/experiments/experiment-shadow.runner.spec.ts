import { FixedAdapter, makeShadowCall, makeTarget, silentLogger } from '../../test/support/kit';
import { GatewayError } from '../common/errors/gateway-error';
import type { TargetRef } from '../config/gateway-config';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import type { ChatResult, ProviderAdapter, UpstreamTarget } from '../providers/provider-adapter';
import { UpstreamError } from '../providers/upstream-error';
import { CapabilityCheck, ClientGoneError, Dispatched, DispatcherService } from '../routing/dispatcher.service';
import type { DecisionTrace, DecisionTraceWriter } from '../traces/decision-trace.writer';
import { ExperimentShadowOptions, ExperimentShadowRunner, type ShadowCall } from './experiment-shadow.runner';

const CAND: TargetRef = { provider: 'groq', model: 'llama' };
const SHADOW = { experimentId: '00000000-0000-4000-8000-000000000001', target: CAND };

const upstream = makeTarget({ family: 'groq', id: 'groq' }, 'llama', { id: 'llama', cost: { input_per_mtok: 1, output_per_mtok: 2 } });
const result: ChatResult = {
  choices: [{ index: 0, message: { role: 'assistant', content: 'candidate text' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1_000, completion_tokens: 500, total_tokens: 1_500 },
};

type Behaviour = 'ok' | 'hang' | 'error' | 'throw';

/**
 * Stands in for DispatcherService: `ok` answers, `hang` waits for the abort (and fails as the real
 * dispatcher does then), `error` fails with a gateway error. Each call waits for `gate` first.
 */
class FakeDispatcher {
  behaviour: Behaviour = 'ok';
  calls: Array<{ plan: readonly TargetRef[]; signal: AbortSignal }> = [];
  private open!: () => void;
  gate: Promise<void> = Promise.resolve();

  hold(): void {
    this.gate = new Promise((r) => (this.open = r));
  }
  release(): void {
    this.open();
  }

  async run<T>(plan: readonly TargetRef[], signal: AbortSignal, _supports: CapabilityCheck, attempt: (a: ProviderAdapter, t: UpstreamTarget) => Promise<T>): Promise<Dispatched<T>> {
    this.calls.push({ plan, signal });
    await this.gate;
    if (this.behaviour === 'hang') {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      throw new ClientGoneError();
    }
    if (this.behaviour === 'error') throw new GatewayError('upstream_error', 'The upstream providers failed (last upstream status 503).', { cause: new UpstreamError('status', 'x', { status: 503 }) });
    if (this.behaviour === 'throw') throw new TypeError('bug');
    const adapter = new FixedAdapter(result);
    return { value: await attempt(adapter, upstream), target: plan[0], upstream, attempts: 1, fallbackUsed: false, failedAttempts: [] };
  }
}

class FakeTraces {
  rows: DecisionTrace[] = [];
  failing = false;
  record(t: DecisionTrace): void {
    if (this.failing) throw new Error('writer bug');
    this.rows.push(t);
  }
}

const call = (): ShadowCall => makeShadowCall({}, 'secret prompt');

function setup(options: ExperimentShadowOptions = {}) {
  const dispatcher = new FakeDispatcher();
  const traces = new FakeTraces();
  const metrics = new MetricsService();
  const runner = new ExperimentShadowRunner(dispatcher as unknown as DispatcherService, traces as unknown as DecisionTraceWriter, metrics, new StoreFallback(metrics, silentLogger()), options);
  const counted = async (outcome: string) => {
    const m = (await metrics.registry.getSingleMetric('gateway_experiment_shadow_copies_total')!.get()).values.find((v) => v.labels.outcome === outcome);
    return m?.value ?? 0;
  };
  return { runner, dispatcher, traces, counted };
}

describe('ExperimentShadowRunner', () => {
  it('returns before any work starts, then records the candidate outcome as its own trace (no session, no text)', async () => {
    const { runner, dispatcher, traces, counted } = setup();
    expect(runner.run(SHADOW, call())).toBe(true);
    expect(dispatcher.calls).toHaveLength(0);
    await runner.idle();
    expect(dispatcher.calls.map((c) => c.plan)).toEqual([[CAND]]);
    expect(traces.rows).toHaveLength(1);
    expect(traces.rows[0]).toMatchObject({
      requestId: 'req-1',
      orgId: 'acme',
      apiKeyId: 'acme-rw',
      sessionId: null,
      endpoint: 'chat',
      requestedModel: 'auto',
      selectedProvider: 'groq',
      selectedModel: 'llama',
      experimentId: SHADOW.experimentId,
      experimentArm: 'candidate',
      status: 200,
      errorCode: null,
      attempts: 1,
      promptTokens: 1_000,
      completionTokens: 500,
      costUsd: (1_000 * 1 + 500 * 2) / 1e6,
      finishReason: 'stop',
    });
    expect(JSON.stringify(traces.rows[0])).not.toMatch(/secret prompt|candidate text/);
    expect(await counted('ok')).toBe(1);
  });

  it('bounded: beyond maxInFlight copies are dropped and counted; room frees as copies finish', async () => {
    const { runner, dispatcher, traces, counted } = setup({ maxInFlight: 3 });
    dispatcher.hold();
    const started = Array.from({ length: 5 }, () => runner.run(SHADOW, call()));
    expect(started).toEqual([true, true, true, false, false]);
    expect(runner.inFlight).toBe(3);
    expect(await counted('dropped')).toBe(2);
    dispatcher.release();
    await runner.idle();
    expect(traces.rows).toHaveLength(3);
    expect(runner.run(SHADOW, call())).toBe(true);
    await runner.idle();
    expect(traces.rows).toHaveLength(4);
  });

  it('its own timeout aborts the copy, recorded as 504 upstream_timeout of the candidate', async () => {
    const { runner, dispatcher, traces, counted } = setup({ timeoutMs: 30 });
    dispatcher.behaviour = 'hang';
    runner.run(SHADOW, call());
    await runner.idle();
    expect(dispatcher.calls[0].signal.aborted).toBe(true);
    expect(traces.rows[0]).toMatchObject({ status: 504, errorCode: 'upstream_timeout', experimentArm: 'candidate', promptTokens: null, costUsd: null });
    expect(await counted('timeout')).toBe(1);
  });

  it('a failed candidate is recorded with the gateway status and code; an unexpected error as 500 internal', async () => {
    const { runner, dispatcher, traces } = setup();
    dispatcher.behaviour = 'error';
    runner.run(SHADOW, call());
    await runner.idle();
    dispatcher.behaviour = 'throw';
    runner.run(SHADOW, call());
    await runner.idle();
    expect(traces.rows.map((t) => [t.status, t.errorCode, t.attempts])).toEqual([
      [502, 'upstream_error', 1],
      [500, 'internal', 0],
    ]);
  });

  it('never throws, even when recording fails', async () => {
    const { runner, traces } = setup();
    traces.failing = true;
    expect(runner.run(SHADOW, call())).toBe(true);
    await runner.idle();
    expect(runner.inFlight).toBe(0);
  });

  it('shutdown: no new copies; running ones get shutdownTimeoutMs, then are aborted and not recorded', async () => {
    const { runner, dispatcher, traces, counted } = setup({ shutdownTimeoutMs: 20 });
    dispatcher.behaviour = 'hang';
    runner.run(SHADOW, call());
    await runner.beforeApplicationShutdown();
    expect(traces.rows).toHaveLength(0);
    expect(await counted('aborted')).toBe(1);
    expect(runner.run(SHADOW, call())).toBe(false);
  });
});
