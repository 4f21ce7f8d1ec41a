import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ApiKeyGuard } from './common/auth/api-key.guard';
import { CommonModule } from './common/common.module';
import { GatewayExceptionFilter } from './common/errors/gateway-exception.filter';
import { AdminModule } from './admin/admin.module';
import { ConsoleModule } from './console/console.module';
import { ChatModule } from './chat/chat.module';
import { EmbeddingsModule } from './embeddings/embeddings.module';
import { ExperimentsModule } from './experiments/experiments.module';
import { FeedbackModule } from './feedback/feedback.module';
import { LearningModule } from './learning/learning.module';
import { RoutingExplainModule } from './routing-explain/routing-explain.module';
import { ResponsesModule } from './responses/responses.module';
import { ResilienceModule } from './resilience/resilience.module';
import { RetentionModule } from './retention/retention.module';
import { AppLogger } from './common/logging/logger';
import { LoggerModule } from './common/logging/logger.module';
import { AppConfig } from './config/app-config';
import { ConfigModule } from './config/config.module';
import { HealthModule } from './health/health.module';
import { MetricsModule } from './metrics/metrics.module';
import { ModelsModule } from './models/models.module';
import { StoresModule } from './stores/stores.module';
import { TenancyModule } from './tenancy/tenancy.module';

@Module({})
export class AppModule {
  /** The whole gateway for a given configuration and logger (main.ts, the CLI and e2e tests use it). */
  static forRoot(config: AppConfig, logger: AppLogger): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(logger),
        CommonModule,
        MetricsModule,
        ResilienceModule,
        StoresModule,
        TenancyModule,
        // Express tries its routes in the order the modules register them, each a path match: the
        // endpoints every request of an application calls come first (docs/architecture.md "Performance budget").
        ChatModule,
        ResponsesModule,
        EmbeddingsModule,
        HealthModule,
        ModelsModule,
        ExperimentsModule,
        FeedbackModule,
        LearningModule,
        RetentionModule,
        RoutingExplainModule,
        AdminModule,
        ConsoleModule,
      ],
      providers: [
        // The API-key guard lives here, where TenancyModule provides its authenticator.
        ApiKeyGuard,
        // useExisting, so tests can overrideProvider the concrete classes.
        { provide: APP_GUARD, useExisting: ApiKeyGuard },
        { provide: APP_FILTER, useExisting: GatewayExceptionFilter },
      ],
    };
  }
}
