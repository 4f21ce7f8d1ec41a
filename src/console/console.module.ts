import { Module } from '@nestjs/common';
import { ConsoleAssets } from './console-assets';
import { ConsoleController } from './console.controller';

/** The operator console served at /console (docs/architecture.md "Console"; `console.enabled`). */
@Module({ controllers: [ConsoleController], providers: [ConsoleAssets] })
export class ConsoleModule {}
