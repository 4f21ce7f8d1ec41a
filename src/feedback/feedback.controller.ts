import { Controller, HttpCode, Post, Req } from '@nestjs/common';
import { KiB } from '../common/http/json-body.decorator';
import type { GatewayRequest } from '../common/http/request-context';
import { ValidBody } from '../common/http/validated-body';
import { SubmitFeedbackDto } from './dto/submit-feedback.dto';
import { FeedbackService } from './feedback.service';

@Controller('v1')
export class FeedbackController {
  constructor(private readonly feedback: FeedbackService) {}

  /** Contract `POST /v1/feedback`: 200 `{}`; a bad body is 400 `invalid_request` with `param`. The body is three small fields: 8 KiB is ample. */
  @Post('feedback')
  @HttpCode(200)
  submit(@Req() req: GatewayRequest, @ValidBody({ limit: 8 * KiB, invalidCode: 'invalid_request' }, SubmitFeedbackDto) dto: SubmitFeedbackDto): Promise<Record<string, never>> {
    return this.feedback.submit(req.caller!, dto);
  }
}
