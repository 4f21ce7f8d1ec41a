import { Controller, Get, Param, Patch, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import { JsonBody, KiB } from '../../common/http/json-body.decorator';
import type { Caller } from '../../common/http/request-context';
import { AuthCaller } from '../common/auth-caller';
import type { Page } from '../common/admin-store';
import type { AdminKeyJson } from '../keys/admin-keys.mapper';
import type { OrgAuditJson, OrgLimitsJson } from './admin-limits.mapper';
import { AdminLimitsService } from './admin-limits.service';

/** A body of controls is small: 8 KiB, as the keys routes take; bad JSON is 400 `invalid_body`. */
const LIMITS_BODY = { limit: 8 * KiB, invalidCode: 'invalid_body' as const };

/**
 * docs/api.md "Admin API", limits: the organisation's controls (`/v1/admin/limits`) and a key's
 * (`PATCH /v1/admin/keys/{id}`, beside the keys routes). 401 → 403 `admin_permission` → 400 (query
 * or body) → 404 → 409.
 */
@Controller('v1/admin')
export class AdminLimitsController {
  constructor(private readonly limits: AdminLimitsService) {}

  @Get('limits')
  @AdminEndpoint()
  get(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<OrgLimitsJson> {
    return this.limits.get(caller, query);
  }

  @Patch('limits')
  @AdminEndpoint()
  change(@AuthCaller() caller: Caller, @Query() query: unknown, @JsonBody(LIMITS_BODY) body: unknown): Promise<OrgLimitsJson> {
    return this.limits.change(caller, query, body);
  }

  @Get('limits/audit')
  @AdminEndpoint()
  audit(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<Page<OrgAuditJson>> {
    return this.limits.audit(caller, query);
  }

  @Patch('keys/:id')
  @AdminEndpoint()
  changeKey(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown, @JsonBody(LIMITS_BODY) body: unknown): Promise<AdminKeyJson> {
    return this.limits.changeKey(caller, id, query, body);
  }
}
