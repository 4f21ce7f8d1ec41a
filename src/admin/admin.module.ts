import { Module } from '@nestjs/common';
import { AdminKeysModule } from './keys/admin-keys.module';

/**
 * The operators' REST API under /v1/admin (docs/api.md "Admin API"): one sub-module per resource,
 * every route behind the `admin` permission and scoped to the caller's organisation.
 */
@Module({ imports: [AdminKeysModule] })
export class AdminModule {}
