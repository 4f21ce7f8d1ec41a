import { Module } from '@nestjs/common';
import { ExperimentsController } from './experiments.controller';
import { ExperimentsRepository } from './experiments.repository';
import { ExperimentsService } from './experiments.service';

/**
 * The Experiments API (contract "Experiments", DESIGN §5). Exports the service: the chat path reads
 * `activeFor()`, the stop-rule job calls `complete()` / `rollbackBySystem()`.
 */
@Module({ controllers: [ExperimentsController], providers: [ExperimentsService, ExperimentsRepository], exports: [ExperimentsService] })
export class ExperimentsModule {}
