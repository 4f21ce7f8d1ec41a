import { ExportRow, jsonText, KindSchema, microsToIso } from '../export-schema';
import type { ByteSink } from './byte-sink';
import type { EncoderOptions, RecordEncoder } from './record-encoder';

/**
 * RFC 4180: a header line of the column names, CRLF line ends, a field quoted when it holds a quote,
 * a comma or a line break. NULL is an empty field; an empty string is written `""`, so the two stay
 * apart. jsonb columns hold their JSON text, booleans `true`/`false`.
 */
export class CsvEncoder implements RecordEncoder {
  rows = 0;
  private readonly types: string[];
  private pendingHeader: string | null;

  constructor(
    schema: KindSchema,
    private readonly sink: ByteSink,
    options: EncoderOptions = {},
  ) {
    this.types = schema.columns.map((c) => c.type);
    this.pendingHeader = options.header === false ? null : `${schema.columns.map((c) => c.name).join(',')}\r\n`;
  }

  async write(rows: readonly ExportRow[]): Promise<void> {
    let text = this.pendingHeader ?? '';
    this.pendingHeader = null;
    for (const row of rows) {
      let line = '';
      for (let i = 0; i < this.types.length; i++) {
        if (i > 0) line += ',';
        line += field(this.types[i], row[i]);
      }
      text += `${line}\r\n`;
    }
    this.rows += rows.length;
    if (text) await this.sink.write(text);
  }

  async end(): Promise<void> {
    // A file with no row still has its header.
    if (this.pendingHeader) await this.write([]);
  }
}

const NEEDS_QUOTES = /[",\r\n]/;

function field(type: string, v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = type === 'json' ? jsonText(v) : type === 'timestamp' ? microsToIso(String(v)) : String(v);
  if (s === '' || NEEDS_QUOTES.test(s)) return `"${s.replace(/"/g, '""')}"`;
  return s;
}
