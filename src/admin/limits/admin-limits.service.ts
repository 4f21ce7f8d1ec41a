import { Injectable } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import type { Caller } from '../../common/http/request-context';
import { AppConfig } from '../../config/app-config';
import { LimitsService } from '../../limits/limits.service';
import { StoreFallback } from '../../resilience/store-fallback';
import { TenancyService } from '../../tenancy/tenancy.service';
import { AdminQuery } from '../common/admin-query';
import { fromAnalytics, type Page } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import { type AdminKeyJson, toAdminKeyJson } from '../keys/admin-keys.mapper';
import { OrgAuditJson, OrgLimitsJson, toOrgAuditJson, toOrgLimitsJson } from './admin-limits.mapper';
import { LimitsPatch } from './limits-patch';

/** Byte-identical for another organisation's key, a missing id and an id no key can have (as the keys routes answer). */
const KEY_NOT_FOUND = 'No key with this id in the organisation.';
const MAX_ID_LENGTH = 128;

/**
 * The controls of the caller's organisation and of its keys (docs/api.md "Admin API", limits;
 * README "Limits"), on top of tenancy, which owns the records, and the limiter, which counts the
 * spend. Every change is a JSON merge patch of the controls, checked before anything is read, and
 * written with its audit row (`key_audit` for a key, `org_audit` for the organisation) in the same
 * transaction. What comes from gateway.yaml is the file's: 409 `config_managed_key` /
 * `config_managed_org`.
 */
@Injectable()
export class AdminLimitsService {
  constructor(
    private readonly tenancy: TenancyService,
    private readonly limits: LimitsService,
    private readonly config: AppConfig,
    private readonly fallback: StoreFallback,
  ) {}

  async get(caller: Caller, rawQuery: unknown): Promise<OrgLimitsJson> {
    AdminQuery.parse(rawQuery, []);
    const org = await fromAnalytics(this.fallback, 'limits', () => this.tenancy.findOrg(caller.orgId));
    // The caller's own organisation: it exists while its key authenticates (a race with its removal aside).
    if (!org) throw new GatewayError('not_found', 'No such organisation.');
    return this.json(caller.orgId, org.source === 'config', org.limits);
  }

  async change(caller: Caller, rawQuery: unknown, body: unknown): Promise<OrgLimitsJson> {
    AdminQuery.parse(rawQuery, []);
    const patch = LimitsPatch.forOrg(body, this.config.gateway);
    const org = await fromAnalytics(this.fallback, 'limits', () => this.tenancy.changeOrgLimits(caller.orgId, (current) => patch.apply(current), { actor: 'api', keyId: caller.keyId }));
    if (!org) throw new GatewayError('not_found', 'No such organisation.');
    return this.json(caller.orgId, false, org.limits);
  }

  async audit(caller: Caller, rawQuery: unknown): Promise<Page<OrgAuditJson>> {
    const q = AdminQuery.parse(rawQuery, ['limit', 'cursor']);
    const { limit, cursor } = q.page();
    const scope = ['org-audit', caller.orgId];
    const after = decodeCursor(cursor, scope, ['int'] as const);
    const rows = await fromAnalytics(this.fallback, 'limits', () => this.tenancy.pageOrgAudit(caller.orgId, after?.[0] ?? '0', limit + 1));
    return pageOf(rows, limit, scope, (a) => [a.id], toOrgAuditJson);
  }

  /** `PATCH /v1/admin/keys/{id}`: the key's controls (its `expires_at` included). */
  async changeKey(caller: Caller, id: string, rawQuery: unknown, body: unknown): Promise<AdminKeyJson> {
    AdminQuery.parse(rawQuery, []);
    const patch = LimitsPatch.forKey(body, this.config.gateway);
    const key =
      id.length > MAX_ID_LENGTH
        ? null
        : await fromAnalytics(this.fallback, 'keys', () => this.tenancy.changeKeyLimits(caller.orgId, id, (current) => patch.apply(current), { actor: 'api', keyId: caller.keyId }));
    if (!key) throw new GatewayError('not_found', KEY_NOT_FOUND);
    return toAdminKeyJson(key);
  }

  private async json(orgId: string, configManaged: boolean, limits: OrgLimitsJson['limits']): Promise<OrgLimitsJson> {
    const { month, spend } = await fromAnalytics(this.fallback, 'limits', () => this.limits.spendOf(orgId));
    return toOrgLimitsJson(orgId, configManaged, limits, month, spend);
  }
}
