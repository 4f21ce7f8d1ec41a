import type { ExportPosition } from './export-position';
import type { ExportRow } from './export-schema';

/** Where one kind's rows go: a directory of rotated files, or standard output. */
export interface ExportDestination {
  /** The durable cursor to resume from (null: none, start from the beginning). */
  start(): Promise<ExportPosition | null>;
  /** A batch of a step: `from` is the position before its first row, `to` the one after its last. */
  write(rows: readonly ExportRow[], from: ExportPosition, to: ExportPosition): Promise<void>;
  /** Everything up to `at` is exported (a step ended, or there was nothing new): rotate or persist if due. */
  reached(at: ExportPosition): Promise<void>;
  /** Makes what was written durable now (before a pause for an outage). */
  flush(): Promise<void>;
  /** Flushes and persists the last position reached; the destination is done. */
  close(): Promise<void>;
}
