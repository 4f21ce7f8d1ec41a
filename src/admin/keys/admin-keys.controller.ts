import { Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import { KiB } from '../../common/http/json-body.decorator';
import type { Caller } from '../../common/http/request-context';
import { ValidBody } from '../../common/http/validated-body';
import { AuthCaller } from '../common/auth-caller';
import type { Page } from '../common/admin-store';
import { CreateKeyDto } from './create-key.dto';
import type { AdminKeyJson, KeyAuditJson } from './admin-keys.mapper';
import { AdminKeysService } from './admin-keys.service';

/** docs/api.md "Admin API", keys. 401 → 403 `admin_permission` → 400 (query or body) → 404 → 409. */
@Controller('v1/admin/keys')
export class AdminKeysController {
  constructor(private readonly keys: AdminKeysService) {}

  @Get()
  @AdminEndpoint()
  list(@AuthCaller() caller: Caller, @Query() query: unknown): Promise<Page<AdminKeyJson>> {
    return this.keys.list(caller, query);
  }

  @Post()
  @HttpCode(201)
  @AdminEndpoint()
  create(@AuthCaller() caller: Caller, @Query() query: unknown, @ValidBody({ limit: 8 * KiB, invalidCode: 'invalid_body' }, CreateKeyDto) dto: CreateKeyDto): Promise<AdminKeyJson & { key: string }> {
    return this.keys.create(caller, query, dto);
  }

  @Get(':id')
  @AdminEndpoint()
  get(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<AdminKeyJson> {
    return this.keys.get(caller, id, query);
  }

  @Get(':id/audit')
  @AdminEndpoint()
  audit(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<Page<KeyAuditJson>> {
    return this.keys.audit(caller, id, query);
  }

  /** No body is read: a revoke takes none. */
  @Delete(':id')
  @HttpCode(200)
  @AdminEndpoint()
  remove(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<AdminKeyJson> {
    return this.keys.revoke(caller, id, query);
  }

  @Post(':id/revoke')
  @HttpCode(200)
  @AdminEndpoint()
  revoke(@AuthCaller() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<AdminKeyJson> {
    return this.keys.revoke(caller, id, query);
  }
}
