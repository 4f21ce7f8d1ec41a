import { GatewayError } from '../../common/errors/gateway-error';
import { isObject } from '../../common/http/body-checks';
import { ownValue } from '../../common/own-key';
import type { GatewayConfig } from '../../config/gateway-config';
import { allowListEntryProblem } from '../../config/gateway-config';
import { KeyLimits, keyLimitsSchema, OrgLimits, orgLimitsSchema } from '../../config/gateway-config.schema';
import { ConfigError } from '../../config/schema';

const CONTROLS = ['requests_per_minute', 'tokens_per_minute', 'monthly_budget_usd', 'models'] as const;
const KEY_CONTROLS = [...CONTROLS, 'expires_at'] as const;

const invalid = (param: string, message: string): GatewayError => new GatewayError('invalid_body', message, { param });

/**
 * A change of a key's or an organisation's controls (docs/api.md "Admin API", limits): the body
 * `{"limits": …}` as a JSON merge patch of the controls. `null` clears them all; in an object a
 * control set to a value replaces it and one set to `null` removes it, the others stay. Each value
 * is checked by the config's own rules (README "Limits": the same shape as gateway.yaml), and a
 * `models` entry must name a catalogue model, a `provider/model` pair or a route alias. Refused
 * with 400 `invalid_body` naming the field, before anything is read or changed.
 */
export class LimitsPatch<L extends OrgLimits> {
  private constructor(
    private readonly clear: boolean,
    private readonly set: Partial<L>,
    private readonly removed: readonly string[],
  ) {}

  static forKey(body: unknown, gateway: GatewayConfig): LimitsPatch<KeyLimits> {
    return LimitsPatch.parse<KeyLimits>(body, KEY_CONTROLS, (v) => keyLimitsSchema.parse(v, 'limits'), gateway);
  }

  static forOrg(body: unknown, gateway: GatewayConfig): LimitsPatch<OrgLimits> {
    return LimitsPatch.parse<OrgLimits>(body, CONTROLS, (v) => orgLimitsSchema.parse(v, 'limits'), gateway);
  }

  private static parse<L extends OrgLimits>(body: unknown, names: readonly string[], check: (v: unknown) => L, gateway: GatewayConfig): LimitsPatch<L> {
    if (!isObject(body)) throw new GatewayError('invalid_body', 'The request body must be a JSON object.');
    for (const k of Object.keys(body)) if (k !== 'limits') throw invalid(k, `unknown field "${k}"`);
    const patch = ownValue(body, 'limits');
    if (patch === undefined) throw invalid('limits', 'limits is required (an object of controls, or null to clear them).');
    if (patch === null) return new LimitsPatch<L>(true, {}, []);
    if (!isObject(patch)) throw invalid('limits', 'limits must be an object of controls, or null.');
    const given: Record<string, unknown> = {};
    const removed: string[] = [];
    for (const k of Object.keys(patch)) {
      if (!names.includes(k)) throw invalid(`limits.${k}`, `unknown control "${k}" (allowed: ${names.join(', ')})`);
      const v = ownValue(patch, k);
      if (v === null) removed.push(k);
      else given[k] = v;
    }
    let set: L;
    try {
      set = check(given);
    } catch (err) {
      if (err instanceof ConfigError) throw invalid(err.path, `${err.path}: ${err.detail}`);
      throw err;
    }
    set.models?.forEach((name, i) => {
      const problem = allowListEntryProblem(name, gateway.models, gateway.routes);
      if (problem) throw invalid(`limits.models.${i}`, `limits.models.${i}: ${problem}`);
    });
    return new LimitsPatch<L>(false, set as Partial<L>, removed);
  }

  /** The controls after the patch; null when none is left. */
  apply(current: L | null): L | null {
    if (this.clear) return null;
    const next: Record<string, unknown> = { ...(current ?? {}) };
    for (const k of this.removed) delete next[k];
    for (const [k, v] of Object.entries(this.set)) if (v !== undefined) next[k] = v;
    return Object.keys(next).length === 0 ? null : (next as L);
  }
}
