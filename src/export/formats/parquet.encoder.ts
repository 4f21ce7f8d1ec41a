import { ExportColumn, ExportRow, jsonText, KindSchema } from '../export-schema';
import type { ByteSink } from './byte-sink';
import type { EncoderOptions, RecordEncoder } from './record-encoder';

/**
 * Parquet through hyparquet-writer (docs/operations.md "Decisions export", why this writer): typed
 * columns (int64 ids, timestamps in µs UTC, int32, double, boolean, UTF-8 strings, JSON), Snappy
 * pages, row groups of at most `rowGroupRows` rows. A row group is encoded in memory and handed to
 * the sink whole, waiting out the sink's back-pressure before the next: memory is bounded by one row
 * group whatever the file's length. Min/max statistics on id and created_at only (what a reader
 * prunes row groups by); on every column they cost a quarter of the encoding time.
 */
type Hyparquet = typeof import('hyparquet-writer', { with: { 'resolution-mode': 'import' } });
let loaded: Promise<Hyparquet> | null = null;
/** hyparquet-writer is an ES module: loaded once, on the first Parquet file. */
const hyparquet = (): Promise<Hyparquet> => (loaded ??= import('hyparquet-writer'));

export const DEFAULT_ROW_GROUP_ROWS = 10_000;
const STATISTICS = new Set(['id', 'created_at']);

interface SchemaElement {
  name: string;
  type?: string;
  repetition_type?: string;
  converted_type?: string;
  logical_type?: Record<string, unknown>;
  num_children?: number;
}

function element(c: ExportColumn): SchemaElement {
  const repetition_type = c.nullable ? 'OPTIONAL' : 'REQUIRED';
  switch (c.type) {
    case 'int64':
      return { name: c.name, type: 'INT64', repetition_type };
    case 'int32':
      return { name: c.name, type: 'INT32', repetition_type };
    case 'double':
      return { name: c.name, type: 'DOUBLE', repetition_type };
    case 'bool':
      return { name: c.name, type: 'BOOLEAN', repetition_type };
    case 'timestamp':
      return { name: c.name, type: 'INT64', repetition_type, converted_type: 'TIMESTAMP_MICROS', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' } };
    case 'json':
      // Handed over as the UTF-8 bytes of the JSON text: with converted_type JSON the writer would
      // serialise each value again (a string into a quoted string). The footer gets it (`end`).
      return { name: c.name, type: 'BYTE_ARRAY', repetition_type, logical_type: { type: 'JSON' } };
    case 'string':
      return { name: c.name, type: 'BYTE_ARRAY', repetition_type, converted_type: 'UTF8', logical_type: { type: 'STRING' } };
  }
}

/** The Parquet schema of a kind (root first, then one leaf per column). */
export function parquetSchema(schema: KindSchema): SchemaElement[] {
  return [{ name: 'root', num_children: schema.columns.length }, ...schema.columns.map(element)];
}

export class ParquetEncoder implements RecordEncoder {
  rows = 0;
  private readonly rowGroupRows: number;
  private columns: unknown[][];
  private pending = 0;
  private writer: InstanceType<Hyparquet['ParquetWriter']> | null = null;
  private readonly elements: SchemaElement[];

  constructor(
    private readonly schema: KindSchema,
    private readonly sink: ByteSink,
    options: EncoderOptions = {},
  ) {
    this.rowGroupRows = options.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS;
    this.columns = schema.columns.map(() => []);
    this.elements = parquetSchema(schema);
  }

  async write(rows: readonly ExportRow[]): Promise<void> {
    const types = this.schema.columns.map((c) => c.type);
    for (const row of rows) {
      for (let i = 0; i < types.length; i++) {
        const v = row[i];
        const t = types[i];
        this.columns[i].push(v === null || v === undefined ? null : t === 'int64' || t === 'timestamp' ? BigInt(v as string) : t === 'json' ? Buffer.from(jsonText(v)) : v);
      }
      this.rows++;
      if (++this.pending >= this.rowGroupRows) await this.flushGroup();
    }
  }

  async end(): Promise<void> {
    if (this.pending > 0) await this.flushGroup();
    const w = await this.open();
    // Every row group is encoded: the footer written now may say JSON in the older annotation too,
    // which readers that know no logical type (and DuckDB, which then reads JSON, not a blob) go by.
    for (const e of this.elements) if (e.logical_type?.type === 'JSON') e.converted_type = 'JSON';
    await w.finish();
  }

  private async open(): Promise<InstanceType<Hyparquet['ParquetWriter']>> {
    if (this.writer) return this.writer;
    const { ParquetWriter, ByteWriter } = await hyparquet();
    const bytes = new ByteWriter(1 << 20);
    const sink = this.sink;
    // Each row group, once encoded, goes to the sink and the buffer starts over: the writer awaits
    // this before it encodes the next one.
    const drain = (): Promise<void> => {
      if (bytes.index === 0) return Promise.resolve();
      const chunk = Buffer.from(new Uint8Array(bytes.buffer, 0, bytes.index));
      bytes.index = 0;
      return sink.write(chunk);
    };
    Object.assign(bytes, { flush: drain, finish: drain });
    this.writer = new ParquetWriter({
      writer: bytes,
      schema: this.elements as never,
      codec: 'SNAPPY',
      statistics: false,
      kvMetadata: [
        { key: 'gateway.export.kind', value: this.schema.kind },
        { key: 'gateway.export.schema_version', value: String(this.schema.version) },
      ],
      createdBy: 'routing-gateway export (hyparquet-writer)',
    });
    return this.writer;
  }

  private async flushGroup(): Promise<void> {
    const w = await this.open();
    // No offset index: a column chunk of one row group is a page or two, nothing for a reader to skip
    // by, and its entries would wait in memory until the footer.
    const columnData = this.schema.columns.map((c, i) => ({ name: c.name, data: this.columns[i], statistics: STATISTICS.has(c.name), offsetIndex: false }));
    this.columns = this.schema.columns.map(() => []);
    this.pending = 0;
    await w.write({ columnData, rowGroupSize: columnData[0].data.length });
  }
}
