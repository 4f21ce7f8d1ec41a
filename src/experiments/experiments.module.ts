import { Module } from '@nestjs/common';
import { LimitsModule } from '../limits/limits.module';
import { RegressionsModule } from '../routing/regressions/regressions.module';
import { RegressionsService } from '../routing/regressions/regressions.service';
import { RoutingModule } from '../routing/routing.module';
import { TracesModule } from '../traces/traces.module';
import { ExperimentRegressionSink } from './experiment-regression.sink';
import { ExperimentShadowRunner } from './experiment-shadow.runner';
import { ExperimentStatsRepository } from './experiment-stats.repository';
import { ExperimentStopRulesJob } from './experiment-stop-rules.job';
import { ExperimentRouter } from './experiment.router';
import { ExperimentsController } from './experiments.controller';
import { ExperimentsRepository } from './experiments.repository';
import { ExperimentsService } from './experiments.service';

/**
 * Experiments (docs/api.md "POST /v1/experiments", docs/architecture.md "Experiments in the chat path"): the API, the chat path's experiment
 * step (ExperimentRouter: the canary split and shadow copies) and the stop-rule job. Exports the
 * router for ChatService and the service for whoever needs the active experiments.
 */
@Module({
  imports: [RoutingModule, RegressionsModule, TracesModule, LimitsModule],
  controllers: [ExperimentsController],
  providers: [
    ExperimentsService,
    ExperimentsRepository,
    ExperimentRouter,
    ExperimentShadowRunner,
    ExperimentStatsRepository,
    ExperimentStopRulesJob,
    // A rollback's regression goes to the routing issue's record, which explain's evidence reads.
    { provide: ExperimentRegressionSink, useExisting: RegressionsService },
  ],
  // The stop rules' figures too: the Admin API shows them for a running experiment.
  exports: [ExperimentsService, ExperimentRouter, ExperimentStatsRepository],
})
export class ExperimentsModule {}
