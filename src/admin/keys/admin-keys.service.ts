import { Injectable } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import type { Caller } from '../../common/http/request-context';
import type { Permission } from '../../config/gateway-config.schema';
import { StoreFallback } from '../../resilience/store-fallback';
import { TenancyService } from '../../tenancy/tenancy.service';
import { AdminQuery } from '../common/admin-query';
import { fromAnalytics, type Page } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import type { CreateKeyDto } from './create-key.dto';
import { AdminKeyJson, KeyAuditJson, toAdminKeyJson, toKeyAuditJson } from './admin-keys.mapper';

/** Byte-identical for another organisation's key, a missing id and an id no key can have. */
const NOT_FOUND_MESSAGE = 'No key with this id in the organisation.';
const MAX_ID_LENGTH = 128;
const DEFAULT_PERMISSIONS: Permission[] = ['read', 'write'];

/**
 * Keys of the caller's organisation (docs/api.md "Admin API", keys), on top of tenancy, which owns
 * them: listing (never a key or its hash), issuing (the key shown once, in the 201 body) and
 * revoking (the same eviction and tombstone as the CLI), each change with its audit row in the same
 * transaction. Keys from gateway.yaml are the file's: 409 `config_managed_key`.
 */
@Injectable()
export class AdminKeysService {
  constructor(
    private readonly tenancy: TenancyService,
    private readonly fallback: StoreFallback,
  ) {}

  async list(caller: Caller, rawQuery: unknown): Promise<Page<AdminKeyJson>> {
    const q = AdminQuery.parse(rawQuery, ['limit', 'cursor', 'revoked']);
    const revoked = q.bool('revoked') ?? null;
    const { limit, cursor } = q.page();
    const scope = ['keys', caller.orgId, revoked];
    const after = decodeCursor(cursor, scope, ['time', 'text'] as const);
    const rows = await fromAnalytics(this.fallback, 'keys', () =>
      this.tenancy.pageKeys(caller.orgId, after ? { position: after[0], id: after[1] } : null, revoked, limit + 1),
    );
    return pageOf(rows, limit, scope, (k) => [k.position, k.id], toAdminKeyJson);
  }

  async get(caller: Caller, id: string, rawQuery: unknown): Promise<AdminKeyJson> {
    AdminQuery.parse(rawQuery, []);
    return toAdminKeyJson(await this.found(caller, id));
  }

  async audit(caller: Caller, id: string, rawQuery: unknown): Promise<Page<KeyAuditJson>> {
    const q = AdminQuery.parse(rawQuery, ['limit', 'cursor']);
    const { limit, cursor } = q.page();
    await this.found(caller, id);
    const scope = ['key-audit', caller.orgId, id];
    const after = decodeCursor(cursor, scope, ['int'] as const);
    const rows = await fromAnalytics(this.fallback, 'keys', () => this.tenancy.pageKeyAudit(caller.orgId, id, after?.[0] ?? '0', limit + 1));
    return pageOf(rows, limit, scope, (a) => [a.id], toKeyAuditJson);
  }

  /** 201 body: the key's record and, this once, the key itself. */
  async create(caller: Caller, rawQuery: unknown, dto: CreateKeyDto): Promise<AdminKeyJson & { key: string }> {
    AdminQuery.parse(rawQuery, []);
    const permissions = dto.permissions ?? DEFAULT_PERMISSIONS;
    const { key, view } = await fromAnalytics(this.fallback, 'keys', () =>
      this.tenancy.createKey(caller.orgId, [...permissions], undefined, 'api', { actor: 'api', keyId: caller.keyId }),
    );
    return { ...toAdminKeyJson(view), key };
  }

  /** Revokes the organisation's key; a revoked key answers as it is (no change, no audit row). */
  async revoke(caller: Caller, id: string, rawQuery: unknown): Promise<AdminKeyJson> {
    AdminQuery.parse(rawQuery, []);
    const revoked = id.length > MAX_ID_LENGTH ? null : await fromAnalytics(this.fallback, 'keys', () => this.tenancy.revokeOrgKey(caller.orgId, id, { actor: 'api', keyId: caller.keyId }));
    if (!revoked) throw new GatewayError('not_found', NOT_FOUND_MESSAGE);
    return toAdminKeyJson(revoked);
  }

  private async found(caller: Caller, id: string) {
    const key = id.length > MAX_ID_LENGTH ? null : await fromAnalytics(this.fallback, 'keys', () => this.tenancy.findKey(caller.orgId, id));
    if (!key) throw new GatewayError('not_found', NOT_FOUND_MESSAGE);
    return key;
  }
}
