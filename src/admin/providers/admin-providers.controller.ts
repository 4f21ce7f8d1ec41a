import { Controller, Get, Param, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import type { Caller } from '../../common/http/request-context';
import { AuthCaller } from '../common/auth-caller';
import { AdminProviderJson, AdminProvidersPage, AdminProvidersService } from './admin-providers.service';

/** docs/api.md "Admin API", providers. */
@Controller('v1/admin/providers')
export class AdminProvidersController {
  constructor(private readonly providers: AdminProvidersService) {}

  @Get()
  @AdminEndpoint()
  list(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<AdminProvidersPage> {
    return this.providers.list(caller, query);
  }

  @Get(':id')
  @AdminEndpoint()
  get(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<AdminProviderJson & { window: { from: string; to: string } }> {
    return this.providers.get(caller, id, query);
  }
}
