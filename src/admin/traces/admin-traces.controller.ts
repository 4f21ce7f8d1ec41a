import { Controller, Get, Param, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import type { Caller } from '../../common/http/request-context';
import type { Page } from '../common/admin-store';
import { AuthCaller } from '../common/auth-caller';
import type { TraceDetailJson, TraceSummaryJson } from './admin-traces.mapper';
import { AdminTracesService } from './admin-traces.service';

/** docs/api.md "Admin API", traces. */
@Controller('v1/admin/traces')
export class AdminTracesController {
  constructor(private readonly traces: AdminTracesService) {}

  @Get()
  @AdminEndpoint()
  search(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<Page<TraceSummaryJson>> {
    return this.traces.search(caller, query);
  }

  @Get(':id')
  @AdminEndpoint()
  get(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<TraceDetailJson> {
    return this.traces.get(caller, id, query);
  }
}
