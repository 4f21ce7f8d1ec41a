import { Module } from '@nestjs/common';
import { LimitsModule } from '../limits/limits.module';
import { ProvidersModule } from '../providers/providers.module';
import { RoutingModule } from '../routing/routing.module';
import { TracesModule } from '../traces/traces.module';
import { EmbeddingsController } from './embeddings.controller';
import { EmbeddingsService } from './embeddings.service';

/** `POST /v1/embeddings`: forwarded with fallback to providers that have an embeddings API. */
@Module({ imports: [ProvidersModule, RoutingModule, LimitsModule, TracesModule], controllers: [EmbeddingsController], providers: [EmbeddingsService] })
export class EmbeddingsModule {}
