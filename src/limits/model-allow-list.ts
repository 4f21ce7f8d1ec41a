import type { Caller } from '../common/http/request-context';
import { ownValue } from '../common/own-key';
import { ModelSpec, resolveTarget } from '../config/gateway-config';

/**
 * Whether one name a request may send as `model` (a catalogue id, a `provider/model` pair or a
 * route alias; one entry of a comma list) is on an allow-list (README "Limits"). A name is allowed
 * when the list holds it; a `provider/model` pair also when the list holds its catalogue model (the
 * model, from any of its providers). A bare catalogue id is not allowed by a pair of it: the pair
 * names one provider, the bare id all of them.
 */
export function onAllowList(list: readonly string[], name: string, models: Readonly<Record<string, ModelSpec>>): boolean {
  if (list.includes(name)) return true;
  if (ownValue(models, name)) return false;
  const pair = resolveTarget(name, models);
  return typeof pair !== 'string' && pair.length === 1 && name.includes('/') && list.includes(pair[0].model);
}

/** Both the key's and the organisation's lists allow `name` (a caller without lists may use every name). */
export function callerMayUse(caller: Caller, name: string, models: Readonly<Record<string, ModelSpec>>): boolean {
  const key = caller.limits?.key?.models;
  const org = caller.limits?.org?.models;
  return (key === undefined || onAllowList(key, name, models)) && (org === undefined || onAllowList(org, name, models));
}

/** Whether the caller has an allow-list at all (the check costs nothing otherwise). */
export const hasAllowList = (caller: Caller): boolean => caller.limits?.key?.models !== undefined || caller.limits?.org?.models !== undefined;
