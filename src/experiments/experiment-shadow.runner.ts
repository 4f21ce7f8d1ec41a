import { BeforeApplicationShutdown, Injectable, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import type { Caller } from '../common/http/request-context';
import type { TargetRef } from '../config/gateway-config';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import type { ChatRequest, ChatResult } from '../providers/provider-adapter';
import { CapabilityCheck, ClientGoneError, Dispatched, DispatcherService, failureOutcome } from '../routing/dispatcher.service';
import { DecisionTraceWriter } from '../traces/decision-trace.writer';
import { stripUndefined } from '../common/options';
import { buildDecisionTrace } from '../traces/decision-trace.builder';

export class ExperimentShadowOptions {
  /** Copies in flight at once in this process; a copy beyond it is dropped (and counted). */
  maxInFlight?: number;
  /** A copy is aborted after this long, and recorded as a 504 `upstream_timeout` of the candidate. */
  timeoutMs?: number;
  /** How long shutdown waits for copies to finish before aborting them. */
  shutdownTimeoutMs?: number;
}

const DEFAULTS = { maxInFlight: 16, timeoutMs: 60_000, shutdownTimeoutMs: 2_000 };

/** What the chat path knows of the request whose copy goes to the candidate. */
export interface ShadowCall {
  caller: Caller;
  requestId: string;
  requestedModel: string;
  route: string | null;
  strategy: string | null;
  /** The request exactly as the baseline got it (templates filled, firewall applied). */
  request: ChatRequest;
  /** The chat path's capability check: a candidate that cannot take the request is not called. */
  supports: CapabilityCheck;
}

export type ShadowOutcome = 'ok' | 'error' | 'timeout' | 'dropped' | 'aborted';

class ShadowTimeout extends Error {}
class ShadowShutdown extends Error {}

/**
 * Shadow copies (docs/architecture.md "Experiments in the chat path"): the candidate gets the same request in the background;
 * its answer is discarded and its outcome recorded as a decision trace of its own (arm `candidate`,
 * no text). The client's response is never delayed or changed: `run` returns before any
 * work starts, the copy has its own AbortController and timeout (a client that disconnects does not
 * abort it; shutdown does), at most `maxInFlight` copies run per process and the excess is dropped
 * and counted, and nothing here throws.
 *
 * A copy is always a non-streaming call, whatever the client asked for: only its outcome, latency and
 * tokens are kept. Its trace carries the request id of the request it copies and no session id, so
 * the learning loop never credits the candidate with feedback on an answer the user never saw.
 */
@Injectable()
export class ExperimentShadowRunner implements BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly outcomes: Counter<'outcome'>;
  private readonly running = new Map<Promise<void>, AbortController>();
  private closed = false;

  constructor(
    private readonly dispatcher: DispatcherService,
    private readonly traces: DecisionTraceWriter,
    metrics: MetricsService,
    private readonly fallback: StoreFallback,
    @Optional() options?: ExperimentShadowOptions,
  ) {
    this.o = { ...DEFAULTS, ...stripUndefined(options) };
    this.outcomes = new Counter({
      name: 'gateway_experiment_shadow_copies_total',
      help: 'Shadow copies to experiment candidates by outcome (ok, error, timeout, dropped = over the in-flight cap, aborted = shutdown)',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
  }

  /** Copies running now. */
  get inFlight(): number {
    return this.running.size;
  }

  /** Starts a copy in the background; false when it was dropped (cap reached, or shutting down). Never throws. */
  run(shadow: { experimentId: string; target: TargetRef }, call: ShadowCall): boolean {
    try {
      if (this.closed || this.running.size >= this.o.maxInFlight) {
        this.outcomes.inc({ outcome: 'dropped' });
        return false;
      }
      const abort = new AbortController();
      const p: Promise<void> = this.copy(shadow.experimentId, shadow.target, call, abort)
        .catch((err: unknown) => this.fallback.warn('experiments:shadow', err))
        .finally(() => this.running.delete(p));
      this.running.set(p, abort);
      return true;
    } catch {
      return false;
    }
  }

  /** Resolves when every copy running now has finished (tests; shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.keys()]);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.closed = true;
    const timer = setTimeout(() => {
      for (const abort of this.running.values()) abort.abort(new ShadowShutdown());
    }, this.o.shutdownTimeoutMs);
    await this.idle();
    clearTimeout(timer);
  }

  private async copy(experimentId: string, target: TargetRef, call: ShadowCall, abort: AbortController): Promise<void> {
    // Nothing runs before the caller's current turn of the event loop is over (its response is written).
    await new Promise<void>((resolve) => setImmediate(resolve));
    const timer = setTimeout(() => abort.abort(new ShadowTimeout()), this.o.timeoutMs);
    const started = process.hrtime.bigint();
    let d: Dispatched<ChatResult> | undefined;
    let status = 200;
    let errorCode: string | null = null;
    try {
      d = await this.dispatcher.run([target], abort.signal, call.supports, (adapter, upstream) =>
        adapter.chat(call.request, { target: upstream, signal: abort.signal, requestId: call.requestId }),
      );
    } catch (err) {
      if (abort.signal.reason instanceof ShadowShutdown) {
        this.outcomes.inc({ outcome: 'aborted' });
        return;
      }
      if (err instanceof ClientGoneError || abort.signal.reason instanceof ShadowTimeout) {
        status = 504;
        errorCode = 'upstream_timeout';
      } else {
        ({ status, errorCode } = failureOutcome(err));
      }
    } finally {
      clearTimeout(timer);
    }
    this.outcomes.inc({ outcome: status === 200 ? 'ok' : errorCode === 'upstream_timeout' ? 'timeout' : 'error' });
    const trace = buildDecisionTrace(
      {
        requestId: call.requestId,
        orgId: call.caller.orgId,
        apiKeyId: call.caller.keyId,
        sessionId: null,
        endpoint: 'chat',
        requestedModel: call.requestedModel,
        route: call.route,
        strategy: call.strategy,
        candidates: null,
        experimentId,
      },
      { status, errorCode: errorCode ?? undefined, dispatched: d, usage: d?.value.usage, finishReason: d?.value.choices[0]?.finish_reason },
      'candidate',
      started,
    );
    this.traces.record({
      ...trace,
      // One target, named as selected whether it served or failed: its failure is already the trace's.
      selectedProvider: target.provider,
      selectedModel: target.model,
      // A failed copy reached the upstream unless the breaker or a capability stopped it first.
      attempts: d?.attempts ?? (errorCode?.startsWith('upstream_') ? 1 : 0),
      failedAttempts: null,
    });
  }
}
