import { Module } from '@nestjs/common';
import { ExperimentsModule } from '../../experiments/experiments.module';
import { AdminExperimentsController } from './admin-experiments.controller';
import { AdminExperimentsRepository } from './admin-experiments.repository';
import { AdminExperimentsService } from './admin-experiments.service';

/** Experiments for operators (docs/api.md "Admin API", experiments): reads here, the stop rules' figures from the experiments module. */
@Module({ imports: [ExperimentsModule], controllers: [AdminExperimentsController], providers: [AdminExperimentsService, AdminExperimentsRepository] })
export class AdminExperimentsModule {}
