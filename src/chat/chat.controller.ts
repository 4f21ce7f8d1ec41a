import { Controller, Post, Req, Res } from '@nestjs/common';
import type { Response } from 'express';
import { JsonBody, MiB } from '../common/http/json-body.decorator';
import type { JsonBodyOptions } from '../common/http/json-body';
import type { GatewayRequest } from '../common/http/request-context';
import { requestScope } from '../common/http/responder';
import { LimitsService } from '../limits/limits.service';
import { parseChatBody } from './chat-request';
import { respondChat } from './chat.encoder';
import { ChatService } from './chat.service';

/** A chat body (and a Responses body, which becomes one): 4 MiB at most; bad JSON is 400 `invalid_request`. */
export const CHAT_BODY: JsonBodyOptions = { limit: 4 * MiB, invalidCode: 'invalid_request' };

@Controller('v1/chat')
export class ChatController {
  constructor(
    private readonly chat: ChatService,
    private readonly limits: LimitsService,
  ) {}

  /**
   * Bad fields are 400 `invalid_request` too, after a model the key may not use (403, docs/api.md
   * "Check order"). The pipeline answers, the encoder writes.
   */
  @Post('completions')
  async complete(@Req() req: GatewayRequest, @JsonBody(CHAT_BODY) body: unknown, @Res() res: Response): Promise<void> {
    this.limits.checkModel(req.caller!, body);
    const call = parseChatBody(body);
    const scope = requestScope(req, res);
    const answer = await this.chat.complete(scope, call);
    if (answer) await respondChat(req, res, answer, call.includeUsage, scope.signal);
  }
}
