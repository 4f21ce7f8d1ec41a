import { Module } from '@nestjs/common';
import { LearningModule } from '../../learning/learning.module';
import { RoutingModule } from '../../routing/routing.module';
import { AdminModelsController } from './admin-models.controller';
import { AdminModelsService } from './admin-models.service';

/** What routing knows per model (docs/api.md "Admin API", models): the learning snapshot, regressions and routing's dry run. */
@Module({ imports: [RoutingModule, LearningModule], controllers: [AdminModelsController], providers: [AdminModelsService] })
export class AdminModelsModule {}
