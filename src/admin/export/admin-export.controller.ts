import { Controller, Get, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { AdminEndpoint } from '../../common/auth/auth.decorators';
import type { Caller } from '../../common/http/request-context';
import { StreamSink } from '../../export/formats/byte-sink';
import { CONTENT_TYPES, createEncoder } from '../../export/formats/encoder-factory';
import { AuthCaller } from '../common/auth-caller';
import { AdminExportService } from './admin-export.service';

/** The cursor the export ends at: a response header, confirmed by the trailer of a response read to its end. */
const CURSOR = 'Export-Cursor';
const ROWS = 'Export-Rows';

/** docs/operations.md "Decisions export", over HTTP. */
@Controller('v1/admin/export')
export class AdminExportController {
  constructor(private readonly exports: AdminExportService) {}

  @Get()
  @AdminEndpoint()
  async export(@AuthCaller() caller: Caller, @Query() query: unknown, @Res() res: Response): Promise<void> {
    // Everything that can be refused (400) or fail (503) is decided before the first byte.
    const p = await this.exports.prepare(caller, query);
    const headers: Record<string, string> = {
      'Content-Type': CONTENT_TYPES[p.format],
      'Cache-Control': 'no-store',
      'Export-Schema-Version': String(p.schema.version),
      [CURSOR]: p.next,
      Trailer: `${CURSOR}, ${ROWS}`,
      // Trailers need chunked encoding, which Node would not choose for an export with no row.
      'Transfer-Encoding': 'chunked',
    };
    res.status(200);
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    const sink = new StreamSink(res);
    const encoder = createEncoder(p.format, p.schema, sink);
    try {
      for await (const rows of this.exports.rows(p)) await encoder.write(rows);
      await encoder.end();
    } catch (err) {
      if (res.destroyed || res.writableEnded) return; // the client left
      const failure = this.exports.failed(err);
      if (!res.headersSent) {
        // Nothing sent yet: an ordinary error answer, without the export's headers.
        for (const k of Object.keys(headers)) res.removeHeader(k);
        throw failure;
      }
      // A store that failed mid-way must not look like the end: the response is cut without its last
      // chunk and trailer, so no client takes it for whole.
      res.destroy();
      return;
    }
    res.addTrailers({ [CURSOR]: p.next, [ROWS]: String(encoder.rows) });
    res.end();
  }
}
