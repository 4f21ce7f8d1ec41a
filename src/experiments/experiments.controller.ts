import { Controller, createParamDecorator, ExecutionContext, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ExperimentsEndpoint } from '../common/auth/auth.decorators';
import { KiB } from '../common/http/json-body.decorator';
import type { Caller, GatewayRequest } from '../common/http/request-context';
import { ValidBody } from '../common/http/validated-body';
import { CreateExperimentDto } from './dto/create-experiment.dto';
import { ExperimentJson, toExperimentJson } from './experiment.mapper';
import { ExperimentsService } from './experiments.service';

/** The caller the global API-key guard authenticated (set on every route that is not `@Public()`). */
const AuthCaller = createParamDecorator((_: unknown, ctx: ExecutionContext): Caller => ctx.switchToHttp().getRequest<GatewayRequest>().caller!);

/**
 * Contract "Experiments". `@ExperimentsEndpoint` holds the check order up to the confirmation header
 * (401 → 403 permission → 403 plan/kill switch → 400 missing_confirmation); the body is read after
 * it with the 8 KiB cap (400 body_too_large), then validated (400 invalid_body).
 */
@Controller('v1/experiments')
export class ExperimentsController {
  constructor(private readonly experiments: ExperimentsService) {}

  @Get()
  @ExperimentsEndpoint('read')
  async list(@AuthCaller() caller: Caller): Promise<ExperimentJson[]> {
    return (await this.experiments.list(caller)).map(toExperimentJson);
  }

  @Post()
  @HttpCode(201)
  @ExperimentsEndpoint('write')
  async create(@AuthCaller() caller: Caller, @ValidBody({ limit: 8 * KiB, invalidCode: 'invalid_body' }, CreateExperimentDto) dto: CreateExperimentDto): Promise<ExperimentJson> {
    return toExperimentJson(await this.experiments.create(caller, dto));
  }

  /** No body is read: rollback takes none (contract). */
  @Post(':id/rollback')
  @HttpCode(200)
  @ExperimentsEndpoint('write')
  async rollback(@AuthCaller() caller: Caller, @Param('id') id: string): Promise<ExperimentJson> {
    return toExperimentJson(await this.experiments.rollback(caller, id));
  }
}
