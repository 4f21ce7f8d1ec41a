import { ExportRow, KindSchema, microsToIso } from '../export-schema';
import type { ByteSink } from './byte-sink';
import type { RecordEncoder } from './record-encoder';

/**
 * A value as the text formats write it: created_at as ISO 8601 UTC with microseconds, ids as
 * numbers (below 2^53), jsonb as the JSON it holds.
 */
export function textValue(type: string, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (type === 'timestamp') return microsToIso(String(v));
  if (type === 'int64') return Number(v);
  return v;
}

/** One JSON object per line, keys in schema order. */
export class NdjsonEncoder implements RecordEncoder {
  rows = 0;
  private readonly names: string[];
  private readonly types: string[];

  constructor(
    schema: KindSchema,
    private readonly sink: ByteSink,
  ) {
    this.names = schema.columns.map((c) => c.name);
    this.types = schema.columns.map((c) => c.type);
  }

  async write(rows: readonly ExportRow[]): Promise<void> {
    if (rows.length === 0) return;
    let text = '';
    for (const row of rows) {
      const o: Record<string, unknown> = {};
      for (let i = 0; i < this.names.length; i++) o[this.names[i]] = textValue(this.types[i], row[i]);
      text += `${JSON.stringify(o)}\n`;
    }
    this.rows += rows.length;
    await this.sink.write(text);
  }

  async end(): Promise<void> {}
}
