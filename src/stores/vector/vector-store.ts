export interface VectorEntry {
  orgId: string;
  model: string;
  /** Caller-chosen key, unique per (org, model); upsert replaces the entry with the same key. */
  key: string;
  embedding: readonly number[];
  /** Opaque payload (the semantic cache stores a response reference, never prompt text). */
  payload: string;
  expiresAt?: Date;
}

export interface VectorMatch {
  key: string;
  payload: string;
  /** Cosine distance, 0 = identical direction. */
  distance: number;
}

export interface VectorStatus {
  up: boolean;
  reason?: string;
}

/**
 * Port of the vector store (docs/architecture.md "Three stores behind ports"): Postgres with the `vector` extension, or PGlite with its
 * `vector` extension. When the extension is missing the store reports down with the reason and the
 * features that need it are off.
 */
export abstract class VectorStore {
  abstract readonly kind: 'postgres' | 'pglite';
  abstract status(timeoutMs: number): Promise<VectorStatus>;
  abstract upsert(entry: VectorEntry): Promise<void>;
  /** The `k` nearest unexpired entries of (org, model) by cosine distance, nearest first. */
  abstract nearest(orgId: string, model: string, embedding: readonly number[], k: number): Promise<VectorMatch[]>;
  abstract close(): Promise<void>;
}
