import { Controller, Get, Param, Req } from '@nestjs/common';
import type { GatewayRequest } from '../common/http/request-context';
import { ModelJson, ModelListJson, toModelJson, toModelListJson } from './model.mapper';
import { ModelsService } from './models.service';

/**
 * OpenAI's `GET /v1/models` and `GET /v1/models/{id}`, which SDKs and chat UIs call before chatting.
 * The same access as chat: any valid key (the global API-key guard), no permission of its own, so
 * every key that can chat can also list what it can chat with.
 */
@Controller('v1/models')
export class ModelsController {
  constructor(private readonly models: ModelsService) {}

  @Get()
  list(@Req() req: GatewayRequest): ModelListJson {
    return toModelListJson(this.models.list(req.caller!));
  }

  /**
   * `*id` takes every path segment: a catalogue id may hold `/` (`meta-llama/Llama-3-8B`), and a
   * `provider/model` pair always does, whether it arrives raw or as `%2F` (the SDK's encoding).
   */
  @Get('*id')
  retrieve(@Req() req: GatewayRequest, @Param('id') segments: string[]): ModelJson {
    return toModelJson(this.models.find(req.caller!, idOfPath(segments)));
  }
}

/**
 * The decoded segments after `/v1/models/`, joined back with `/`. One trailing slash is dropped, as
 * every other route of the gateway ignores it (Express's non-strict routing); a `/` that is part of
 * the id still reaches it encoded as `%2F`.
 */
function idOfPath(segments: readonly string[]): string {
  const kept = segments.length > 1 && segments[segments.length - 1] === '' ? segments.slice(0, -1) : segments;
  return kept.join('/');
}
