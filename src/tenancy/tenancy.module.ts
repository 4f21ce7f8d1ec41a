import { Module } from '@nestjs/common';
import { ApiKeyAuthenticator } from '../common/auth/api-key-authenticator';
import { AppConfig } from '../config/app-config';
import { ApiKeyHasher } from './api-key-hasher';
import { TenancyRepository } from './tenancy.repository';
import { TenancyService } from './tenancy.service';

@Module({
  providers: [
    TenancyRepository,
    TenancyService,
    { provide: ApiKeyHasher, useFactory: (config: AppConfig) => ApiKeyHasher.fromEnv(config.env), inject: [AppConfig] },
    { provide: ApiKeyAuthenticator, useExisting: TenancyService },
  ],
  exports: [TenancyService, ApiKeyAuthenticator],
})
export class TenancyModule {}
