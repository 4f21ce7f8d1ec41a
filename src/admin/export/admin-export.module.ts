import { Module } from '@nestjs/common';
import { AdminExportController } from './admin-export.controller';
import { AdminExportService } from './admin-export.service';

/** The decisions export over HTTP (docs/operations.md "Decisions export"). */
@Module({ controllers: [AdminExportController], providers: [AdminExportService] })
export class AdminExportModule {}
