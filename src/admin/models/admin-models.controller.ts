import { Controller, Get, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import type { Caller } from '../../common/http/request-context';
import { AuthCaller } from '../common/auth-caller';
import { AdminModelsPage, AdminModelsService } from './admin-models.service';

/** docs/api.md "Admin API", models. */
@Controller('v1/admin/models')
export class AdminModelsController {
  constructor(private readonly models: AdminModelsService) {}

  @Get()
  @AdminEndpoint()
  list(@AuthCaller() caller: Caller, @Query() query: unknown): AdminModelsPage {
    return this.models.list(caller, query);
  }
}
