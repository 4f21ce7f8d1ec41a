import { Injectable } from '@nestjs/common';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { ownValue } from '../common/own-key';
import { AppConfig } from '../config/app-config';
import { resolveTarget } from '../config/gateway-config';
import { matches } from '../routing/routing.service';
import { callerMayUse, hasAllowList } from '../limits/model-allow-list';

/** A model name a caller may send as `model`, and who answers for it. */
export interface ListedModel {
  id: string;
  /** The provider of a catalogue model (its first, when several serve it); `gateway` for a route alias. */
  ownedBy: string;
}

/** Who answers for a route alias: the gateway picks the provider per request, so no provider owns it. */
export const GATEWAY_OWNER = 'gateway';

/**
 * Which model names an organisation can use (`GET /v1/models`): every catalogue id, chat and
 * embedding (a bare catalogue id needs no route, so every organisation can use it), and the
 * `models` names of the routes whose `orgs` match the organisation. The route wildcard `*` is not a
 * name a client can pick from a list, so it is left out. A caller whose key or organisation has a
 * `models` allow-list (README "Limits") sees only the names on it, and finds no other.
 */
@Injectable()
export class ModelsService {
  constructor(private readonly config: AppConfig) {}

  /**
   * Sorted by id (UTF-16 code units), so every replica and every layout of the gateway file gives
   * the same list. A route alias equal to a catalogue id is listed once, as the catalogue model.
   */
  list(caller: Caller): ListedModel[] {
    const byId = new Map<string, ListedModel>();
    for (const model of Object.values(this.config.gateway.models)) {
      byId.set(model.id, { id: model.id, ownedBy: model.targets[0].provider });
    }
    for (const route of this.config.gateway.routes) {
      if (!matches(route.orgs, caller.orgId)) continue;
      for (const name of route.models) {
        if (name !== '*' && !byId.has(name)) byId.set(name, { id: name, ownedBy: GATEWAY_OWNER });
      }
    }
    const listed = hasAllowList(caller) ? [...byId.values()].filter((m) => callerMayUse(caller, m.id, this.config.gateway.models)) : [...byId.values()];
    return listed.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * One listed name, or a `provider/model` pair (a valid `model` for chat and embeddings that the
   * list leaves out, as it would repeat every catalogue model once per provider): owned by that
   * provider. Anything else, a name a wildcard route would take included, is 404 `model_not_found`.
   */
  find(caller: Caller, id: string): ListedModel {
    // A name the caller may not use is not there for it: the same 404 as an unknown one.
    if (hasAllowList(caller) && !callerMayUse(caller, id, this.config.gateway.models)) throw notFound(id);
    const model = ownValue(this.config.gateway.models, id);
    if (model) return { id, ownedBy: model.targets[0].provider };
    if (id !== '*' && this.config.gateway.routes.some((r) => matches(r.orgs, caller.orgId) && r.models.includes(id))) {
      return { id, ownedBy: GATEWAY_OWNER };
    }
    // The catalogue id was tried above, so a target list here can only be the pair itself.
    const pair = resolveTarget(id, this.config.gateway.models);
    if (typeof pair !== 'string' && pair.length === 1) return { id, ownedBy: pair[0].provider };
    throw notFound(id);
  }
}

const notFound = (id: string): GatewayError => new GatewayError('model_not_found', `The model "${id}" does not exist or no route serves it.`);
