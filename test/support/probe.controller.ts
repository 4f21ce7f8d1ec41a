import { Controller, Get, HttpCode, Post, Req } from '@nestjs/common';
import { IsIn, IsNumber } from 'class-validator';
import { ExperimentsEndpoint, ExplainEndpoint } from '../../src/common/auth/auth.decorators';
import { GatewayError } from '../../src/common/errors/gateway-error';
import { JsonBody, KiB, MiB } from '../../src/common/http/json-body.decorator';
import type { GatewayRequest } from '../../src/common/http/request-context';
import { ValidBody } from '../../src/common/http/validated-body';

class ProbeDto {
  @IsIn(['canary', 'shadow'])
  type: string;
  @IsNumber()
  traffic_pct: number;
}

/**
 * Test-only routes that carry the real guard decorators and body caps of the contract's endpoint
 * families, so the skeleton's cross-cutting pieces are tested before those endpoints exist.
 */
@Controller('v1/probe')
export class ProbeController {
  @Get('experiments')
  @ExperimentsEndpoint('read')
  list(@Req() req: GatewayRequest) {
    return { org: req.caller?.orgId };
  }

  @Post('experiments')
  @HttpCode(201)
  @ExperimentsEndpoint('write')
  create(@ValidBody({ limit: 8 * KiB, invalidCode: 'invalid_body' }, ProbeDto) body: ProbeDto) {
    if (body.traffic_pct < 0 || body.traffic_pct > 100) throw new GatewayError('invalid_traffic_pct');
    return body;
  }

  @Post('explain')
  @HttpCode(200)
  @ExplainEndpoint()
  explain(@JsonBody({ limit: 64 * KiB, invalidCode: 'invalid_body' }) body: object) {
    return { keys: Object.keys(body) };
  }

  @Post('chat')
  @HttpCode(200)
  chat(@JsonBody({ limit: 4 * MiB, invalidCode: 'invalid_request' }) body: object) {
    return { keys: Object.keys(body) };
  }

  @Get('boom')
  boom(): never {
    throw new Error('database password is hunter2');
  }
}
