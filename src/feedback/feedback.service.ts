import { Injectable } from '@nestjs/common';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppLogger } from '../common/logging/logger';
import { ThrottledWarning } from '../common/logging/throttled-warning';
import { LimitsService } from '../limits/limits.service';
import { MetricsService } from '../metrics/metrics.service';
import { SubmitFeedbackDto } from './dto/submit-feedback.dto';
import { FeedbackRepository } from './feedback.repository';

/**
 * `POST /v1/feedback` (contract "Feedback request", issue 6 "Feedback"): the body is already
 * validated by the DTO; the key's rate limit is spent, then the answer is upserted for the caller's
 * organisation. The learning loop reads it later, so nothing else happens on the request path.
 */
@Injectable()
export class FeedbackService {
  private readonly warning: ThrottledWarning;

  constructor(
    private readonly feedback: FeedbackRepository,
    private readonly limits: LimitsService,
    private readonly metrics: MetricsService,
    logger: AppLogger,
  ) {
    this.warning = new ThrottledWarning(logger.pino);
  }

  async submit(caller: Caller, dto: SubmitFeedbackDto): Promise<Record<string, never>> {
    await this.limits.checkKeyRate(caller, 'feedback');
    try {
      await this.feedback.upsert({ orgId: caller.orgId, sessionId: dto.session_id, score: dto.score, useful: dto.useful });
    } catch (err) {
      // Unlike traces, feedback is not buffered: the client is told, and may send it again (an upsert, so a retry is safe).
      // The store's own timeouts bound the wait (DESIGN §10: never a hang).
      this.metrics.storeErrors.inc({ store: 'analytics' });
      this.warning.warn('analytics-store:feedback', err);
      throw new GatewayError('internal', 'Feedback could not be stored; try again later.', { status: 503, cause: err });
    }
    return {};
  }
}
