import { Controller, Get, Param, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import type { Caller } from '../../common/http/request-context';
import type { Page } from '../common/admin-store';
import { AuthCaller } from '../common/auth-caller';
import type { AdminExperimentJson, ExperimentEventJson } from './admin-experiments.mapper';
import { AdminExperimentsService, ExperimentDetailJson } from './admin-experiments.service';

/** docs/api.md "Admin API", experiments. Read only: experiments change through /v1/experiments. */
@Controller('v1/admin/experiments')
export class AdminExperimentsController {
  constructor(private readonly experiments: AdminExperimentsService) {}

  @Get()
  @AdminEndpoint()
  list(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<Page<AdminExperimentJson>> {
    return this.experiments.list(caller, query);
  }

  @Get(':id')
  @AdminEndpoint()
  get(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<ExperimentDetailJson> {
    return this.experiments.get(caller, id, query);
  }

  @Get(':id/events')
  @AdminEndpoint()
  events(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<Page<ExperimentEventJson>> {
    return this.experiments.events(caller, id, query);
  }
}
