import { Module } from '@nestjs/common';
import { ModelsController } from './models.controller';
import { ModelsService } from './models.service';

/** `GET /v1/models` and `GET /v1/models/{id}`: the names an organisation can send as `model`, read from the config. */
@Module({ controllers: [ModelsController], providers: [ModelsService] })
export class ModelsModule {}
