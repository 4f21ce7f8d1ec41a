import { Controller, Post, Req, Res } from '@nestjs/common';
import type { Response } from 'express';
import { JsonBody, MiB } from '../common/http/json-body.decorator';
import type { GatewayRequest } from '../common/http/request-context';
import { ChatService } from './chat.service';

@Controller('v1/chat')
export class ChatController {
  constructor(private readonly chat: ChatService) {}

  /** DESIGN §5: 4 MiB cap; bad JSON and bad fields are 400 `invalid_request`. */
  @Post('completions')
  complete(@Req() req: GatewayRequest, @JsonBody({ limit: 4 * MiB, invalidCode: 'invalid_request' }) body: unknown, @Res() res: Response): Promise<void> {
    return this.chat.complete(req, body, res);
  }
}
