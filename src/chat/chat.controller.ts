import { Controller, Post, Req, Res } from '@nestjs/common';
import type { Response } from 'express';
import { JsonBody, MiB } from '../common/http/json-body.decorator';
import type { GatewayRequest } from '../common/http/request-context';
import { requestScope } from '../common/http/responder';
import { parseChatBody } from './chat-request';
import { respondChat } from './chat.encoder';
import { ChatService } from './chat.service';

@Controller('v1/chat')
export class ChatController {
  constructor(private readonly chat: ChatService) {}

  /** 4 MiB cap; bad JSON and bad fields are 400 `invalid_request`. The pipeline answers, the encoder writes. */
  @Post('completions')
  async complete(@Req() req: GatewayRequest, @JsonBody({ limit: 4 * MiB, invalidCode: 'invalid_request' }) body: unknown, @Res() res: Response): Promise<void> {
    const call = parseChatBody(body);
    const scope = requestScope(req, res);
    const answer = await this.chat.complete(scope, call);
    if (answer) await respondChat(req, res, answer, call.includeUsage, scope.signal);
  }
}
