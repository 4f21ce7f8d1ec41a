import type { Feature, KillSwitch, Permission, Plan } from '../config/gateway-config.schema';

export type Source = 'config' | 'cli' | 'demo';

export interface OrgRecord {
  id: string;
  name: string;
  plan: Plan;
  features: Feature[];
  monthlyRequestLimit: number | null;
  killSwitches: KillSwitch[];
  source: Source;
}

export interface ApiKeyRecord {
  id: string;
  orgId: string;
  keyHash: string;
  keyPrefix: string;
  permissions: Permission[];
  source: Source;
}

export interface OrgSummary extends OrgRecord {
  activeKeys: number;
}
