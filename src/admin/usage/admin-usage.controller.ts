import { Controller, Get, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import type { Caller } from '../../common/http/request-context';
import { AuthCaller } from '../common/auth-caller';
import { AdminUsageService, UsageJson } from './admin-usage.service';

/** docs/api.md "Admin API", usage. */
@Controller('v1/admin/usage')
export class AdminUsageController {
  constructor(private readonly usage: AdminUsageService) {}

  @Get()
  @AdminEndpoint()
  series(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<UsageJson> {
    return this.usage.series(caller, query);
  }
}
