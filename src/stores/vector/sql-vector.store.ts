import { join } from 'node:path';
import { runMigrations, MigrationError, type MigrationSet } from '../sql/migrator';
import type { SqlStore } from '../sql/sql-store';
import { withTimeout } from '../with-timeout';
import { VectorStore, type VectorEntry, type VectorMatch, type VectorStatus } from './vector-store';
import { errorMessage } from '../../common/errors/error-message';

/** The vector store's migrations, recorded apart from the analytics ones (the database may differ). */
export const VECTOR_MIGRATIONS: MigrationSet = { dir: join(__dirname, 'migrations'), table: 'vector_schema_migrations' };

export const VECTOR_EXTENSION_MISSING = 'the vector extension is not installed on this Postgres server';

/** Thrown by upsert/nearest while the store is down; callers turn the feature off. */
export class VectorStoreUnavailableError extends Error {
  constructor(reason: string) {
    super(`vector store unavailable: ${reason}`);
    this.name = 'VectorStoreUnavailableError';
  }
}

/** pgvector's limit for the `vector` type. */
const MAX_DIMS = 16_000;
const MAX_K = 1_000;

/*
 * The sizes that have a partial HNSW index in 0001_semantic_cache.sql, with the type it is built on.
 * An index is used only when the query repeats the index expression with the literal size, so each
 * size gets its own constant statement; sizes and type names come from this list, never from input.
 */
const INDEXED: ReadonlyMap<number, 'vector' | 'halfvec'> = new Map([
  [256, 'vector'],
  [384, 'vector'],
  [512, 'vector'],
  [768, 'vector'],
  [1024, 'vector'],
  [1536, 'vector'],
  [3072, 'halfvec'],
]);

const NEAREST_INDEXED = new Map(
  [...INDEXED].map(([n, type]) => [
    n,
    `SELECT key, payload, (embedding::${type}(${n})) <=> $3::${type}(${n}) AS distance
       FROM semantic_cache
      WHERE dims = ${n} AND org_id = $1 AND model = $2 AND (expires_at IS NULL OR expires_at > now())
      ORDER BY (embedding::${type}(${n})) <=> $3::${type}(${n})
      LIMIT $4`,
  ]),
);

const NEAREST_UNINDEXED = `SELECT key, payload, embedding <=> $3::vector AS distance
       FROM semantic_cache
      WHERE dims = $5 AND org_id = $1 AND model = $2 AND (expires_at IS NULL OR expires_at > now())
      ORDER BY embedding <=> $3::vector
      LIMIT $4`;

/** The nearest-neighbour statement for one size (exported so tests can EXPLAIN it). */
export function nearestSql(dims: number): { sql: string; indexed: boolean } {
  const sql = NEAREST_INDEXED.get(dims);
  return sql ? { sql, indexed: true } : { sql: NEAREST_UNINDEXED, indexed: false };
}

const UPSERT = `INSERT INTO semantic_cache (org_id, model, key, dims, embedding, payload, expires_at)
  VALUES ($1, $2, $3, $4, $5::vector, $6, $7)
  ON CONFLICT (org_id, model, key) DO UPDATE
    SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding, payload = EXCLUDED.payload,
        expires_at = EXCLUDED.expires_at, created_at = now()`;

const EXTENSION_AVAILABLE = `SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`;

/* SQLSTATEs of CREATE EXTENSION when the extension's files are absent (PG 15: 58P01, newer: 0A000). */
const EXTENSION_ABSENT_CODES = new Set(['58P01', '0A000']);

export interface SqlVectorStoreOptions {
  /** Whether close() also closes the SQL store (false when it is shared with the analytics store). */
  ownsStore: boolean;
  /** While down, status() retries start-up at most this often, so installing pgvector needs no restart. */
  retryIntervalMs?: number;
}

/**
 * The vector store on any SqlStore: a Postgres server with pgvector, or the embedded PGlite (whose
 * `vector` extension is always loaded). One class, so the SQL exists once; only the executor differs.
 * It never fails start-up: when the extension or the server is missing it reports down with the
 * reason (`/health/vector`), and upsert/nearest reject with VectorStoreUnavailableError.
 */
export class SqlVectorStore extends VectorStore {
  readonly kind: 'postgres' | 'pglite';
  private downReason: string | undefined = 'not started';
  private lastAttempt = 0;
  private starting: Promise<void> | undefined;
  private readonly retryIntervalMs: number;

  constructor(
    private readonly sql: SqlStore,
    private readonly options: SqlVectorStoreOptions,
  ) {
    super();
    this.kind = sql.kind;
    this.retryIntervalMs = options.retryIntervalMs ?? 30_000;
  }

  /**
   * Checks for the extension and applies the vector migrations. Never rejects: a failure leaves the
   * store down with the reason. `migrateWith` lets start-up use a connection with long timeouts.
   */
  start(migrateWith: SqlStore = this.sql): Promise<void> {
    this.starting ??= this.tryStart(migrateWith).finally(() => (this.starting = undefined));
    return this.starting;
  }

  async status(timeoutMs: number): Promise<VectorStatus> {
    if (this.downReason !== undefined && Date.now() - this.lastAttempt >= this.retryIntervalMs) {
      await withTimeout(this.start(), timeoutMs, 'vector store start-up').catch(() => undefined);
    }
    if (this.downReason !== undefined) return { up: false, reason: this.downReason };
    try {
      await this.sql.ping(timeoutMs);
      return { up: true };
    } catch (err) {
      return { up: false, reason: errorMessage(err) };
    }
  }

  async upsert(entry: VectorEntry): Promise<void> {
    this.assertUp();
    const dims = checkEmbedding(entry.embedding);
    await this.sql.query(UPSERT, [entry.orgId, entry.model, entry.key, dims, literal(entry.embedding), entry.payload, entry.expiresAt ?? null]);
  }

  async nearest(orgId: string, model: string, embedding: readonly number[], k: number): Promise<VectorMatch[]> {
    this.assertUp();
    const dims = checkEmbedding(embedding);
    if (!Number.isInteger(k) || k < 1 || k > MAX_K) throw new RangeError(`k must be an integer from 1 to ${MAX_K}, got ${k}`);
    const { sql, indexed } = nearestSql(dims);
    const params = [orgId, model, literal(embedding), k];
    const { rows } = await this.sql.query<{ key: string; payload: string; distance: number }>(sql, indexed ? params : [...params, dims]);
    return rows.map((r) => ({ key: r.key, payload: r.payload, distance: Number(r.distance) }));
  }

  async close(): Promise<void> {
    if (this.options.ownsStore) await this.sql.close();
  }

  private async tryStart(migrateWith: SqlStore): Promise<void> {
    this.lastAttempt = Date.now();
    try {
      const { rows } = await migrateWith.query(EXTENSION_AVAILABLE, []);
      if (rows.length === 0) {
        this.downReason = VECTOR_EXTENSION_MISSING;
        return;
      }
      await runMigrations(migrateWith, VECTOR_MIGRATIONS);
      this.downReason = undefined;
    } catch (err) {
      const code = err instanceof MigrationError ? (err.cause as { code?: unknown })?.code : undefined;
      this.downReason = typeof code === 'string' && EXTENSION_ABSENT_CODES.has(code) ? VECTOR_EXTENSION_MISSING : errorMessage(err);
    }
  }

  private assertUp(): void {
    if (this.downReason !== undefined) throw new VectorStoreUnavailableError(this.downReason);
  }
}

function checkEmbedding(embedding: readonly number[]): number {
  const n = embedding.length;
  if (n === 0 || n > MAX_DIMS) throw new RangeError(`an embedding must have 1 to ${MAX_DIMS} dimensions, got ${n}`);
  let norm = 0;
  for (const x of embedding) {
    if (!Number.isFinite(x)) throw new RangeError('an embedding must contain only finite numbers');
    norm += x * x;
  }
  // Cosine distance to a zero vector is undefined (pgvector answers NaN), which would poison the ordering.
  if (norm === 0) throw new RangeError('an embedding must not be the zero vector');
  return n;
}

/** pgvector's text form `[1,2,3]`, sent as a parameter and cast in SQL. */
const literal = (embedding: readonly number[]): string => `[${embedding.join(',')}]`;

