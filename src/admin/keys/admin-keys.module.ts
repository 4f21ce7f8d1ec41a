import { Module } from '@nestjs/common';
import { TenancyModule } from '../../tenancy/tenancy.module';
import { AdminKeysController } from './admin-keys.controller';
import { AdminKeysService } from './admin-keys.service';

/** Keys of the caller's organisation (docs/api.md "Admin API", keys); tenancy owns them. */
@Module({ imports: [TenancyModule], controllers: [AdminKeysController], providers: [AdminKeysService] })
export class AdminKeysModule {}
