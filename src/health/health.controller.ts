import { Controller, Get, HttpCode, Res } from '@nestjs/common';
import type { Response } from 'express';
import { Public } from '../common/auth/auth.decorators';
import { HealthService, StoreName } from './health.service';

/** Kubernetes probes; public (docs/api.md "Authentication"), bodies carry no secrets. */
@Public()
@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  /** Liveness: always 200, touches nothing. */
  @Get()
  @HttpCode(200)
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  async ready(@Res({ passthrough: true }) res: Response) {
    const r = await this.health.readiness();
    res.status(r.status === 'down' ? 503 : 200);
    return r;
  }

  @Get('providers')
  providers() {
    return this.health.providers();
  }

  @Get('cache')
  cache(@Res({ passthrough: true }) res: Response) {
    return this.store('cache', res);
  }

  @Get('analytics')
  analytics(@Res({ passthrough: true }) res: Response) {
    return this.store('analytics', res);
  }

  @Get('vector')
  vector(@Res({ passthrough: true }) res: Response) {
    return this.store('vector', res);
  }

  private async store(store: StoreName, res: Response) {
    const indicator = await this.health.indicator(store);
    res.status(indicator[store].status === 'up' ? 200 : 503);
    return indicator;
  }
}
