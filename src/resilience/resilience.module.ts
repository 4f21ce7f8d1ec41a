import { Global, Module } from '@nestjs/common';
import { StoreFallback } from './store-fallback';

/**
 * Resilience shared by every feature (docs/architecture.md "Modules"): how a store failure is
 * counted and logged before the caller falls back. Global, like the stores it is about.
 */
@Global()
@Module({ providers: [StoreFallback], exports: [StoreFallback] })
export class ResilienceModule {}
