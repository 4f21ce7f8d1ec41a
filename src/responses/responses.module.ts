import { Module } from '@nestjs/common';
import { ChatModule } from '../chat/chat.module';
import { LimitsModule } from '../limits/limits.module';
import { ResponsesController } from './responses.controller';

/** `POST /v1/responses`: a wire format of the chat pipeline, so it owns only its mapping and its encoder. */
@Module({ imports: [ChatModule, LimitsModule], controllers: [ResponsesController] })
export class ResponsesModule {}
