import { Module } from '@nestjs/common';
import { ExperimentsModule } from '../experiments/experiments.module';
import { LimitsModule } from '../limits/limits.module';
import { RoutingModule } from '../routing/routing.module';
import { TracesModule } from '../traces/traces.module';
import { ChatController } from './chat.controller';
import { ChatService } from './chat.service';

@Module({ imports: [RoutingModule, LimitsModule, TracesModule, ExperimentsModule], controllers: [ChatController], providers: [ChatService], exports: [ChatService] })
export class ChatModule {}
