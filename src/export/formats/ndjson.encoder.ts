import { ExportRow, jsonText, KindSchema, microsToIso } from '../export-schema';
import type { ByteSink } from './byte-sink';
import type { RecordEncoder } from './record-encoder';

/**
 * A value as the text formats write it, as JSON: created_at as ISO 8601 UTC with microseconds, ids
 * as numbers (below 2^53), jsonb as the JSON it holds, a double that is not finite as null.
 */
export function jsonValue(type: string, v: unknown): string {
  if (v === null || v === undefined) return 'null';
  switch (type) {
    case 'timestamp':
      return `"${microsToIso(String(v))}"`;
    case 'int64':
      return String(v);
    case 'json':
      return jsonText(v);
    case 'string':
      return JSON.stringify(v);
    case 'double':
      return Number.isFinite(v) ? String(v) : 'null';
    default:
      return String(v);
  }
}

/** One JSON object per line, keys in schema order. */
export class NdjsonEncoder implements RecordEncoder {
  rows = 0;
  private readonly keys: string[];
  private readonly types: string[];

  constructor(
    schema: KindSchema,
    private readonly sink: ByteSink,
  ) {
    this.keys = schema.columns.map((c, i) => `${i === 0 ? '{' : ','}${JSON.stringify(c.name)}:`);
    this.types = schema.columns.map((c) => c.type);
  }

  async write(rows: readonly ExportRow[]): Promise<void> {
    if (rows.length === 0) return;
    let text = '';
    for (const row of rows) {
      for (let i = 0; i < this.keys.length; i++) text += this.keys[i] + jsonValue(this.types[i], row[i]);
      text += '}\n';
    }
    this.rows += rows.length;
    await this.sink.write(text);
  }

  async end(): Promise<void> {}
}
