import { Module } from '@nestjs/common';
import { ApiKeyAuthenticator } from '../common/auth/api-key-authenticator';
import { AppConfig } from '../config/app-config';
import { ApiKeyHasher } from './api-key-hasher';
import { TenancyRepository } from './tenancy.repository';
import { TenancyOptions, TenancyService } from './tenancy.service';

@Module({
  providers: [
    TenancyRepository,
    TenancyService,
    // The key caches' lifetimes are a provider of their own, so a test can shorten them.
    { provide: TenancyOptions, useValue: {} },
    { provide: ApiKeyHasher, useFactory: (config: AppConfig) => ApiKeyHasher.fromEnv(config.env), inject: [AppConfig] },
    { provide: ApiKeyAuthenticator, useExisting: TenancyService },
  ],
  exports: [TenancyService, ApiKeyAuthenticator],
})
export class TenancyModule {}
