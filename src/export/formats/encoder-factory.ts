import type { KindSchema } from '../export-schema';
import type { ByteSink } from './byte-sink';
import { CsvEncoder } from './csv.encoder';
import { NdjsonEncoder } from './ndjson.encoder';
import { ParquetEncoder } from './parquet.encoder';
import type { EncoderOptions, ExportFormat, RecordEncoder } from './record-encoder';

export function createEncoder(format: ExportFormat, schema: KindSchema, sink: ByteSink, options: EncoderOptions = {}): RecordEncoder {
  switch (format) {
    case 'ndjson':
      return new NdjsonEncoder(schema, sink);
    case 'csv':
      return new CsvEncoder(schema, sink, options);
    case 'parquet':
      return new ParquetEncoder(schema, sink, options);
  }
}

/** What a response or file of the format is. */
export const CONTENT_TYPES: Readonly<Record<ExportFormat, string>> = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8; header=present',
  parquet: 'application/vnd.apache.parquet',
};
