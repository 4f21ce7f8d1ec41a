import { Controller, Post, Req, Res } from '@nestjs/common';
import type { Response } from 'express';
import { JsonBody, MiB } from '../common/http/json-body.decorator';
import type { GatewayRequest } from '../common/http/request-context';
import { requestScope, respondJson } from '../common/http/responder';
import { embeddingsBody } from './embeddings.mapper';
import { EmbeddingsService } from './embeddings.service';

@Controller('v1')
export class EmbeddingsController {
  constructor(private readonly embeddings: EmbeddingsService) {}

  /** The chat route's 4 MiB cap (README "Errors"); bad JSON and bad fields are 400 `invalid_request`. */
  @Post('embeddings')
  async embed(@Req() req: GatewayRequest, @JsonBody({ limit: 4 * MiB, invalidCode: 'invalid_request' }) body: unknown, @Res() res: Response): Promise<void> {
    const a = await this.embeddings.embed(requestScope(req, res), body);
    if (a) respondJson(req, res, a.served, {}, embeddingsBody(a.served.target.model, a.result, a.call.encodingFormat));
  }
}
