import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { Periodic } from '../common/lifecycle/periodic';
import { AppLogger } from '../common/logging/logger';
import { stripUndefined } from '../common/options';
import { LimitsService } from '../limits/limits.service';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { SubmitFeedbackDto } from './dto/submit-feedback.dto';
import { FeedbackRepository, HeldFeedback } from './feedback.repository';

/** The held-feedback buffer's tuning (tests shorten it). */
export class FeedbackOptions {
  /** Sessions whose answers one replica holds while the analytics store cannot take them. */
  maxHeld?: number;
  /** How often held answers are offered to the store. */
  retryIntervalMs?: number;
  /** How long shutdown waits for held answers to be written. */
  shutdownWaitMs?: number;
  now?: () => number;
}

const DEFAULTS = { maxHeld: 10_000, retryIntervalMs: 1_000, shutdownWaitMs: 5_000 };
const heldKey = (orgId: string, sessionId: string) => `${orgId}\u0000${sessionId}`;

/**
 * docs/api.md "POST /v1/feedback": the body is already validated by the DTO; the
 * key's rate limit is spent, then the answer is upserted for the caller's organisation. The learning
 * loop reads it later, so nothing else happens on the request path.
 *
 * When the analytics store cannot take it (down, frozen, refused by the store breaker), the answer is
 * held in a bounded in-process buffer and the call still succeeds: an end user's rating is the
 * learning loop's signal, and clients rarely send it twice. The buffer keeps each session's latest
 * answer, is offered to the store every `retryIntervalMs`, and is written at shutdown within a bound;
 * a held answer never overwrites a later one stored meanwhile (docs/operations.md "Store outages").
 * Only when the buffer is full is the call refused: 503 `internal`, safe to retry.
 */
@Injectable()
export class FeedbackService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly log: AppLogger['pino'];
  private held = new Map<string, HeldFeedback>();
  private readonly retry = new Periodic(() => this.writeHeld());
  private readonly heldGauge: Gauge;
  private readonly heldWritten: Counter;

  constructor(
    private readonly feedback: FeedbackRepository,
    private readonly limits: LimitsService,
    metrics: MetricsService,
    logger: AppLogger,
    private readonly fallback: StoreFallback,
    @Optional() options?: FeedbackOptions,
  ) {
    const given = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given } as typeof DEFAULTS;
    this.now = given.now ?? Date.now;
    this.log = logger.pino;
    this.heldGauge = new Gauge({ name: 'gateway_feedback_held', help: 'Feedback answers held while the analytics store cannot take them', registers: [metrics.registry] });
    this.heldWritten = new Counter({ name: 'gateway_feedback_held_written_total', help: 'Held feedback answers written once the analytics store answered', registers: [metrics.registry] });
  }

  onApplicationBootstrap(): void {
    this.retry.start(this.o.retryIntervalMs);
  }

  async submit(caller: Caller, dto: SubmitFeedbackDto): Promise<Record<string, never>> {
    // Feedback spends no tokens and no money: only the request windows apply (README "Limits").
    await this.limits.admit(caller, 'feedback');
    const answer = { orgId: caller.orgId, sessionId: dto.session_id, score: dto.score, useful: dto.useful };
    const key = heldKey(answer.orgId, answer.sessionId);
    // While answers are held, a new one joins them rather than overtaking them.
    if (this.held.size === 0) {
      try {
        await this.feedback.upsert(answer);
        return {};
      } catch (err) {
        this.fallback.failed('analytics', 'analytics-store:feedback', err, { fallback: 'answers held in process until the store answers' });
      }
    }
    if (this.held.size >= this.o.maxHeld && !this.held.has(key)) {
      throw new GatewayError('internal', 'Feedback could not be stored; try again later.', { status: 503 });
    }
    // Re-inserted, so the buffer stays in the order answers were last given.
    this.held.delete(key);
    this.held.set(key, { ...answer, givenAt: new Date(this.now()) });
    this.heldGauge.set(this.held.size);
    return {};
  }

  /** Offers every held answer to the store in one statement; on failure they stay held. Never rejects. */
  async writeHeld(): Promise<void> {
    if (this.held.size === 0) return;
    const batch = this.held;
    this.held = new Map();
    try {
      await this.feedback.upsertHeld([...batch.values()]);
      this.heldWritten.inc(batch.size);
    } catch (err) {
      // Answers given meanwhile are newer: they win over the batch's for the same session.
      for (const [k, v] of batch) if (!this.held.has(k)) this.held.set(k, v);
      this.fallback.failed('analytics', 'analytics-store:feedback', err, { held: this.held.size });
    } finally {
      this.heldGauge.set(this.held.size);
    }
  }

  /** SIGTERM: held answers are written within a bound, before the stores close; what is left is logged. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.retry.stop(this.o.shutdownWaitMs);
    if (this.held.size > 0) await Promise.race([this.retry.run(), new Promise((r) => setTimeout(r, this.o.shutdownWaitMs).unref())]);
    if (this.held.size > 0) this.log.warn({ topic: 'feedback', unwritten_answers: this.held.size }, 'held feedback not written at shutdown');
  }
}
