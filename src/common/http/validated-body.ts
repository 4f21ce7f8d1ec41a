import { ArgumentMetadata, PipeTransform, Type } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { validateSync, ValidationError } from 'class-validator';
import { GatewayError } from '../errors/gateway-error';
import { isObject } from './body-checks';
import { JsonBody } from './json-body.decorator';
import type { JsonBodyOptions } from './json-body';

function firstError(errors: ValidationError[], prefix = ''): { param: string; message: string } | undefined {
  for (const e of errors) {
    const param = prefix ? `${prefix}.${e.property}` : e.property;
    if (e.constraints) {
      const [key, message] = Object.entries(e.constraints)[0];
      if (key === 'whitelistValidation') return { param, message: `unknown field "${param}"` };
      return { param, message };
    }
    const nested = firstError(e.children ?? [], param);
    if (nested) return nested;
  }
  return undefined;
}

/**
 * class-validator DTO pipe: whitelist + forbidNonWhitelisted, the first failure becomes the
 * route's 400 code with `param` naming the field.
 */
export class DtoPipe implements PipeTransform {
  constructor(
    private readonly code: 'invalid_body' | 'invalid_request',
    private readonly dto: Type<object>,
  ) {}

  transform(value: unknown, _metadata?: ArgumentMetadata): unknown {
    if (!isObject(value)) throw new GatewayError(this.code, 'The request body must be a JSON object.');
    const instance = plainToInstance(this.dto, value, { enableImplicitConversion: false });
    const errors = validateSync(instance, { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true });
    const err = firstError(errors);
    if (err) throw new GatewayError(this.code, err.message, { param: err.param });
    return instance;
  }
}

/**
 * `@ValidBody({ limit, invalidCode }, CreateExperimentDto) dto`: the JSON body read with the route's cap
 * (JsonBody), then validated against the DTO.
 */
export const ValidBody = (opts: JsonBodyOptions, dto: Type<object>): ParameterDecorator => JsonBody(opts, new DtoPipe(opts.invalidCode, dto));
