import { Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import type { Response } from 'express';
import { ExplainEndpoint } from '../common/auth/auth.decorators';
import { JsonBody, KiB } from '../common/http/json-body.decorator';
import type { GatewayRequest } from '../common/http/request-context';
import type { ExplainResponseJson } from './explain.mapper';
import { RoutingExplainService } from './routing-explain.service';

/**
 * Contract "POST /v1/routing/explain". `@ExplainEndpoint` holds 401 → 403 write_permission → 403
 * plan_required (Pro, `explain` + `feedback_routing`); the body is read after it with the 64 KiB cap.
 */
@Controller('v1/routing')
export class RoutingExplainController {
  constructor(private readonly explainer: RoutingExplainService) {}

  @Post('explain')
  @HttpCode(200)
  @ExplainEndpoint()
  async explain(
    @Req() req: GatewayRequest,
    @JsonBody({ limit: 64 * KiB, invalidCode: 'invalid_body' }) body: unknown,
    @Res({ passthrough: true }) res: Response,
  ): Promise<ExplainResponseJson> {
    const r = await this.explainer.explain({ caller: req.caller!, body, acceptLanguage: req.headers['accept-language'], requestId: req.facts.requestId });
    res.setHeader('Content-Language', r.locale).vary('Accept-Language');
    return r.body;
  }
}
