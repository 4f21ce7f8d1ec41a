import { Module } from '@nestjs/common';
import { AdminTracesController } from './admin-traces.controller';
import { AdminTracesRepository } from './admin-traces.repository';
import { AdminTracesService } from './admin-traces.service';

/** Decision traces for operators (docs/api.md "Admin API", traces). */
@Module({ controllers: [AdminTracesController], providers: [AdminTracesService, AdminTracesRepository] })
export class AdminTracesModule {}
