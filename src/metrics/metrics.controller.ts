import { Controller, Get, Res } from '@nestjs/common';
import type { Response } from 'express';
import { Public } from '../common/auth/auth.decorators';
import { MetricsService } from './metrics.service';
import { AppConfig } from '../config/app-config';
import { GatewayError } from '../common/errors/gateway-error';

@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
  ) {}

  @Public()
  @Get()
  async scrape(@Res() res: Response): Promise<void> {
    if (!this.config.gateway.metrics.enabled) throw new GatewayError('not_found', 'No such endpoint.');
    res.setHeader('Content-Type', this.metrics.registry.contentType);
    res.end(await this.metrics.registry.metrics());
  }
}
