import type { ExportRow } from '../export-schema';

export const EXPORT_FORMATS = ['ndjson', 'csv', 'parquet'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** One output file or stream of one kind's records in one format. */
export interface RecordEncoder {
  /** Encodes rows; resolves when the sink took them (or, for Parquet, buffered them into the open row group). */
  write(rows: readonly ExportRow[]): Promise<void>;
  /** Writes what is buffered and the format's ending (Parquet's footer); the sink's own end is the caller's. */
  end(): Promise<void>;
  /** Rows written so far. */
  readonly rows: number;
}

export interface EncoderOptions {
  /** Parquet: rows per row group (a row group is encoded in memory, so this bounds memory). */
  rowGroupRows?: number;
  /** CSV: write the header line (a stream continued across steps writes it once). */
  header?: boolean;
}
