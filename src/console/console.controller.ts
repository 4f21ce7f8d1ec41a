import { Controller, Get, Param, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { Public } from '../common/auth/auth.decorators';
import { GatewayError } from '../common/errors/gateway-error';
import { CONSOLE_CSP, ConsoleAssets } from './console-assets';

/**
 * The operator console's static files at /console (docs/architecture.md "Console"). Public: the
 * page holds no data; it signs in with an admin key and reads everything from the API. Mounted on
 * /console only, so no API route passes through it. Every answer, a 404 included, carries the
 * console's Content-Security-Policy.
 */
@Controller('console')
export class ConsoleController {
  constructor(private readonly assets: ConsoleAssets) {}

  @Public()
  @Get()
  page(@Req() req: Request, @Res() res: Response): void {
    this.send(req, res, '');
  }

  /** Looked up among the files read at start-up: a path is a map key, never a file-system path. */
  @Public()
  @Get('*path')
  file(@Req() req: Request, @Res() res: Response, @Param('path') segments: string[]): void {
    const path = segments.filter((s, i) => s !== '' || i < segments.length - 1).join('/');
    this.send(req, res, path);
  }

  private send(req: Request, res: Response, path: string): void {
    if (!this.assets.enabled) throw new GatewayError('not_found', 'No such endpoint.');
    res.setHeader('content-security-policy', CONSOLE_CSP);
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('x-frame-options', 'DENY');
    res.setHeader('cross-origin-opener-policy', 'same-origin');
    const reply = this.assets.reply(path, req.headers['accept-encoding'], req.headers['if-none-match']);
    if (!reply) throw new GatewayError('not_found', this.assets.built ? 'No such console file.' : 'The console is not built: run npm run build:console.');
    res.status(reply.status);
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    res.end(reply.body ?? undefined);
  }
}
