import { Controller, Post, Req, Res } from '@nestjs/common';
import type { Response } from 'express';
import { JsonBody } from '../common/http/json-body.decorator';
import type { GatewayRequest } from '../common/http/request-context';
import { requestScope } from '../common/http/responder';
import { CHAT_BODY } from '../chat/chat.controller';
import { LimitsService } from '../limits/limits.service';
import { ChatEndpoint, ChatService } from '../chat/chat.service';
import { parseResponsesBody, responsesParam } from './responses-request';
import { respondResponses } from './responses.encoder';

/** Traced as `responses`; a field no target can take is named as the Responses API names it. */
const RESPONSES: ChatEndpoint = { endpoint: 'responses', param: responsesParam };

@Controller('v1')
export class ResponsesController {
  constructor(
    private readonly chat: ChatService,
    private readonly limits: LimitsService,
  ) {}

  /**
   * OpenAI's Responses API over the chat pipeline: the body maps onto a chat request, the pipeline
   * routes and dispatches it as it does chat, and the Responses encoder writes the answer. The chat
   * route's body limits; bad fields are 400 `invalid_request` with `param`, after a model the key
   * may not use (403 `model_not_allowed`).
   */
  @Post('responses')
  async create(@Req() req: GatewayRequest, @JsonBody(CHAT_BODY) body: unknown, @Res() res: Response): Promise<void> {
    this.limits.checkModel(req.caller!, body);
    const call = parseResponsesBody(body);
    const scope = requestScope(req, res);
    const answer = await this.chat.complete(scope, call.chat, RESPONSES);
    if (answer) await respondResponses(req, res, answer, call.echo, scope.signal);
  }
}
