import { Module } from '@nestjs/common';
import { ApiKeyAuthenticator } from '../common/auth/api-key-authenticator';
import { AppConfig } from '../config/app-config';
import { ApiKeyHasher } from './api-key-hasher';
import { KeyUsageOptions, KeyUsageRecorder } from './key-usage.recorder';
import { TenancyRepository } from './tenancy.repository';
import { TenancyOptions, TenancyService } from './tenancy.service';

@Module({
  providers: [
    TenancyRepository,
    TenancyService,
    // The key caches' lifetimes are a provider of their own, so a test can shorten them.
    { provide: TenancyOptions, useValue: {} },
    // "Last used", batched off the request path; its own options provider so a test can flush sooner.
    KeyUsageRecorder,
    { provide: KeyUsageOptions, useValue: {} },
    { provide: ApiKeyHasher, useFactory: (config: AppConfig) => ApiKeyHasher.fromEnv(config.env), inject: [AppConfig] },
    { provide: ApiKeyAuthenticator, useExisting: TenancyService },
  ],
  exports: [TenancyService, ApiKeyAuthenticator],
})
export class TenancyModule {}
