import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { GatewayError } from '../common/errors/gateway-error';
import type { TargetRef } from '../config/gateway-config';
import { MetricsService } from '../metrics/metrics.service';
import { CircuitBreakerService } from '../resilience/circuit-breaker/circuit-breaker.service';
import { retryAfter } from '../resilience/retry-after';
import type { AdapterCapabilities, ProviderAdapter, UpstreamTarget } from '../providers/provider-adapter';
import { ProviderRegistry } from '../providers/provider-registry';
import { UpstreamError, UpstreamErrorKind } from '../providers/upstream-error';
import type { RequestTelemetry } from '../telemetry/request-telemetry';
import type { TraceHeaders } from '../telemetry/trace-context';

/**
 * The request can't be served by this target (a capability it lacks): the request field, or the
 * field and the 400 message when "no provider supports <field>" would not say why.
 */
export type CapabilityCheck = (caps: AdapterCapabilities) => string | { param: string; message: string } | undefined;

/**
 * An upstream call that failed through the provider's fault (a fallback trigger, docs/api.md "Fallback"): which
 * target, and how — the error kind, and the status when it was one. Never any upstream body text.
 * Recorded on the decision trace so the learning loop counts it against the target (README
 * "Feedback and the learning loop").
 */
export interface FailedAttempt {
  provider: string;
  model: string;
  error: Exclude<UpstreamErrorKind, 'aborted'>;
  status: number | null;
}

export interface Dispatched<T> {
  value: T;
  target: TargetRef;
  upstream: UpstreamTarget;
  /** Upstream calls made, the successful one included. */
  attempts: number;
  /** A target before the one that served was unavailable (failed, or its breaker open). */
  fallbackUsed: boolean;
  /** The upstream calls that failed before the one that served, in order. */
  failedAttempts: FailedAttempt[];
}

/** The client went away: nothing more is tried and nothing can be sent. */
export class ClientGoneError extends Error {
  /**
   * `failedAttempts`: the targets that had failed before the client went away (not the one it left
   * during); `attempts`: upstream calls made, that one included.
   */
  constructor(
    readonly failedAttempts: readonly FailedAttempt[] = [],
    readonly attempts = 0,
  ) {
    super('client went away');
  }
}

/** Dispatch found no target to serve the request; `failedAttempts` are its upstream calls that failed, in order, of `attempts` made. */
export class DispatchError extends GatewayError {
  constructor(
    readonly failedAttempts: readonly FailedAttempt[],
    readonly attempts: number,
    ...args: ConstructorParameters<typeof GatewayError>
  ) {
    super(...args);
  }
}

/** How a failed request is traced: 499 for a client that went away (nothing to answer), else the error's status and code. */
export function failureOutcome(err: unknown): { status: number; errorCode: string; clientGone: boolean } {
  if (err instanceof ClientGoneError) return { status: 499, errorCode: 'client_closed', clientGone: true };
  if (err instanceof GatewayError) return { status: err.status, errorCode: err.code, clientGone: false };
  return { status: 500, errorCode: 'internal', clientGone: false };
}

/** What a request's trace records of dispatch: the dispatch that served it, else how it failed (settleFailure). */
export interface DispatchOutcome {
  dispatched?: Dispatched<unknown>;
  status: number;
  errorCode?: string;
  /** Set by settleFailure when none served: the upstream calls that failed, of `attempts` made. */
  failedAttempts?: readonly FailedAttempt[];
  attempts?: number;
}

/**
 * Records a failed request's outcome for its trace; a client that went away ends the request quietly
 * (there is no one to answer), anything else is rethrown to the exception filter.
 */
export function settleFailure(outcome: DispatchOutcome, err: unknown): void {
  const failure = failureOutcome(err);
  outcome.status = failure.status;
  outcome.errorCode = failure.errorCode;
  if (err instanceof ClientGoneError || err instanceof DispatchError) {
    outcome.failedAttempts = err.failedAttempts;
    outcome.attempts = err.attempts;
  }
  if (!failure.clientGone) throw err;
}

/** The trace's `attempts` and `failedAttempts` (null when none failed): the served dispatch's, else those its failure carried. */
export function tracedAttempts(o: DispatchOutcome): { attempts: number; failedAttempts: readonly FailedAttempt[] | null } {
  const failed = o.dispatched?.failedAttempts ?? o.failedAttempts ?? [];
  return { attempts: o.dispatched?.attempts ?? o.attempts ?? 0, failedAttempts: failed.length > 0 ? failed : null };
}

/**
 * 503 `providers_unavailable` when every breaker is open, whether routing left no target (step 4
 * of docs/architecture.md "The routing chain") or dispatch found them all open; Retry-After = seconds until the first open
 * period ends (rounded up, at least 1).
 */
export function providersUnavailable(reopensInMs: number | undefined): GatewayError {
  return new GatewayError('providers_unavailable', undefined, { headers: retryAfter(reopensInMs) });
}

/** An upstream call's `error.type` on its span: the status when it answered one, else how it failed (network, timeout, protocol). */
export function upstreamErrorType(err: UpstreamError): string {
  return err.kind === 'status' && err.status !== undefined ? String(err.status) : err.kind;
}

/**
 * The fallback triggers (docs/api.md "Fallback"): network error, timeout, 408, 409, 429, 5xx, and 401/403 (the
 * provider is misconfigured). A broken stream (protocol) counts as a server fault. Other 4xx are the
 * request's fault: no fallback, 400 `upstream_invalid_request`.
 */
export function isFallbackTrigger(err: UpstreamError): err is UpstreamError & { readonly kind: FailedAttempt['error'] } {
  if (err.kind === 'network' || err.kind === 'timeout' || err.kind === 'protocol') return true;
  if (err.kind !== 'status' || err.status === undefined) return false;
  const s = err.status;
  return s === 408 || s === 409 || s === 429 || s >= 500 || s === 401 || s === 403;
}

/**
 * Tries the plan's targets in order, each at most once, under the circuit breakers; the first
 * success wins. Used by chat (JSON and streams, where "success" means the stream produced its first
 * output) and by embeddings.
 */
@Injectable()
export class DispatcherService {
  private readonly attemptsTotal: Counter<'provider' | 'outcome'>;
  private readonly fallbacks: Counter;

  constructor(
    private readonly registry: ProviderRegistry,
    private readonly breakers: CircuitBreakerService,
    metrics: MetricsService,
  ) {
    this.attemptsTotal = new Counter({
      name: 'gateway_upstream_attempts_total',
      help: 'Upstream attempts by provider and outcome',
      labelNames: ['provider', 'outcome'] as const,
      registers: [metrics.registry],
    });
    this.fallbacks = new Counter({ name: 'gateway_fallbacks_total', help: 'Requests served by a fallback target', registers: [metrics.registry] });
  }

  async run<T>(
    plan: readonly TargetRef[],
    signal: AbortSignal,
    supports: CapabilityCheck,
    attempt: (adapter: ProviderAdapter, target: UpstreamTarget, trace: TraceHeaders | undefined) => Promise<T>,
    /** The request's span (a child span per upstream call) or the client's trace headers; `trace` is what the call carries. */
    telemetry?: RequestTelemetry,
  ): Promise<Dispatched<T>> {
    let attempts = 0;
    let unavailable = false;
    let unsupported: { param: string; message: string } | undefined;
    let supportedTargets = 0;
    let last: UpstreamError | undefined;
    const failed: FailedAttempt[] = [];
    /** Shortest time left (ms) of the open breakers that rejected; 0 when one was half-open with its probe out. */
    let reopensInMs: number | undefined;

    for (const ref of plan) {
      if (signal.aborted) throw new ClientGoneError(failed, attempts);
      const upstream = this.registry.target(ref);
      const adapter = this.registry.adapterFor(upstream.provider);
      const lacking = supports(adapter.capabilities(upstream));
      if (lacking) {
        unsupported ??= typeof lacking === 'string' ? { param: lacking, message: `No provider for this model supports ${lacking}.` } : lacking;
        continue;
      }
      supportedTargets++;
      const permit = await this.breakers.acquire(ref.provider);
      if (permit === 'reject') {
        unavailable = true;
        reopensInMs = Math.min(reopensInMs ?? Infinity, this.breakers.openForMs(ref.provider) ?? 0);
        this.attemptsTotal.inc({ provider: ref.provider, outcome: 'breaker_open' });
        continue;
      }
      attempts++;
      const call = telemetry?.upstreamCall(ref, upstream, attempts);
      try {
        const value = await attempt(adapter, upstream, call?.headers);
        call?.succeeded();
        void this.breakers.record(ref.provider, true, permit === 'probe');
        this.attemptsTotal.inc({ provider: ref.provider, outcome: 'ok' });
        if (unavailable) this.fallbacks.inc();
        return { value, target: ref, upstream, attempts, fallbackUsed: unavailable, failedAttempts: failed };
      } catch (err) {
        if (signal.aborted || (err instanceof UpstreamError && err.kind === 'aborted')) {
          // No verdict on the provider. A half-open probe's lease is given back, or the provider
          // would get no probe until the lease ran out (probeLeaseMs).
          if (permit === 'probe') void this.breakers.release(ref.provider);
          this.attemptsTotal.inc({ provider: ref.provider, outcome: 'aborted' });
          call?.failed('client_closed');
          throw new ClientGoneError(failed, attempts);
        }
        if (!(err instanceof UpstreamError)) {
          // Our own fault, not the provider's: no verdict, and a probe's lease is given back.
          if (permit === 'probe') void this.breakers.release(ref.provider);
          call?.failed('internal');
          throw err;
        }
        if (!isFallbackTrigger(err)) {
          // The request's fault, not the provider's: the breaker is not charged.
          void this.breakers.record(ref.provider, true, permit === 'probe');
          this.attemptsTotal.inc({ provider: ref.provider, outcome: 'rejected' });
          call?.failed(upstreamErrorType(err));
          throw new DispatchError(failed, attempts, 'upstream_invalid_request', `The upstream provider rejected the request (status ${err.status}).`, { cause: err });
        }
        void this.breakers.record(ref.provider, false, permit === 'probe', { error: err.kind, status: err.status ?? null });
        this.attemptsTotal.inc({ provider: ref.provider, outcome: err.kind });
        call?.failed(upstreamErrorType(err));
        failed.push({ provider: ref.provider, model: ref.model, error: err.kind, status: err.status ?? null });
        last = err;
        unavailable = true;
      }
    }

    if (supportedTargets === 0 && unsupported) {
      throw new GatewayError('invalid_request', unsupported.message, { param: unsupported.param });
    }
    // Every target that could take the request had its breaker open (or half-open, its probe out):
    // Retry-After is the time until the first open period ends, at least 1 s.
    if (attempts === 0 && supportedTargets > 0) {
      throw providersUnavailable(reopensInMs);
    }
    if (last?.kind === 'timeout') throw new DispatchError(failed, attempts, 'upstream_timeout', undefined, { cause: last });
    const status = last?.status ? `last upstream status ${last.status}` : `last failure: ${last?.kind ?? 'none'}`;
    throw new DispatchError(failed, attempts, 'upstream_error', `The upstream providers failed (${status}).`, { cause: last });
  }
}
