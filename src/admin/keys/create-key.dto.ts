import { ArrayMaxSize, ArrayMinSize, ArrayUnique, IsArray, IsIn, IsOptional } from 'class-validator';
import { PERMISSIONS, type Permission } from '../../config/gateway-config.schema';

/**
 * The body of `POST /v1/admin/keys` (docs/api.md "Admin API", keys). Unknown keys and schema
 * failures are 400 `invalid_body` naming the field. No id: the gateway generates it (key ids are
 * unique across organisations, so a chosen one could tell whether another organisation holds it).
 */
export class CreateKeyDto {
  /** Default `read` and `write`, as `gateway keys create`. */
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(PERMISSIONS.length)
  @ArrayUnique()
  @IsIn(PERMISSIONS, { each: true })
  permissions?: Permission[];
}
