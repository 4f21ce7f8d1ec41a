import { DynamicModule, Global, Module } from '@nestjs/common';
import { AppLogger } from './logger';

/** The process logger, provided everywhere as AppLogger (the gateway and the admin CLI each pass theirs). */
@Global()
@Module({})
export class LoggerModule {
  static forRoot(logger: AppLogger): DynamicModule {
    return { module: LoggerModule, providers: [{ provide: AppLogger, useValue: logger }], exports: [AppLogger] };
  }
}
