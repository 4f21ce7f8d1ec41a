import { Type } from 'class-transformer';
import { IsIn, IsInt, IsNumber, IsObject, IsOptional, IsString, Length, Max, Min, ValidateNested } from 'class-validator';
import { EXPERIMENT_TYPES, type ExperimentType } from '../experiment.record';

/*
 * The schema of docs/api.md "POST /v1/experiments". Unknown keys and schema failures are
 * 400 `invalid_body` naming the field (DtoPipe: whitelist + forbidNonWhitelisted). Rules that need
 * the catalogue, the pair comparison and the `traffic_pct` range (its own code, checked after every
 * `invalid_body` rule: docs/api.md "Check order") live in ExperimentsService.
 */

export class TargetDto {
  @IsString()
  @Length(1, 128)
  provider: string;

  @IsString()
  @Length(1, 128)
  model: string;
}

export class StopRuleDto {
  /** Ceiling of the composite-quality drop (0 to 0.5, docs/api.md "POST /v1/experiments"). */
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  @Max(0.5)
  max_regression?: number | null;

  /** 1..1,000,000. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  min_n?: number | null;
}

export class CreateExperimentDto {
  @IsIn(EXPERIMENT_TYPES)
  type: ExperimentType;

  @IsObject()
  @ValidateNested()
  @Type(() => TargetDto)
  baseline: TargetDto;

  @IsObject()
  @ValidateNested()
  @Type(() => TargetDto)
  candidate: TargetDto;

  /** A number is all the schema asks; a number outside [0, 100] is `invalid_traffic_pct`, not `invalid_body`. */
  @IsNumber({ allowNaN: false, allowInfinity: true })
  traffic_pct: number;

  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => StopRuleDto)
  stop_rule?: StopRuleDto | null;
}
