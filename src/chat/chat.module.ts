import { Module } from '@nestjs/common';
import { LimitsModule } from '../limits/limits.module';
import { RoutingModule } from '../routing/routing.module';
import { TracesModule } from '../traces/traces.module';
import { ChatController } from './chat.controller';
import { ChatService } from './chat.service';

@Module({ imports: [RoutingModule, LimitsModule, TracesModule], controllers: [ChatController], providers: [ChatService] })
export class ChatModule {}
