-- Vector store schema (docs/architecture.md "Stores and their fallbacks"). Kept apart from the analytics migrations, with
-- its own bookkeeping table (vector_schema_migrations), because VECTOR_DATABASE_URL may name another
-- database. On a server without pgvector (Debian's Postgres 15) this file fails as a whole and the
-- vector store reports down; nothing else depends on it.
CREATE EXTENSION IF NOT EXISTS vector;

-- Why one untyped `vector` column plus `dims`: embedding models differ in size (384 … 3072), and an
-- HNSW index needs one fixed dimension. A fixed-size column would tie the table to one model. So the
-- column takes any size, `dims` records it, and each common size gets a partial expression index
-- over `embedding::vector(N) WHERE dims = N`. A query can use the index only when it repeats that
-- expression and predicate with the literal N (see SqlVectorStore); other sizes still work, by a
-- sequential scan over their (org, model) rows.
-- HNSW on `vector` is limited to 2000 dimensions, so 3072 (text-embedding-3-large) is indexed as
-- `halfvec` (pgvector ≥ 0.7); half precision costs nothing measurable for cache hit ranking.
-- The index is shared by all organisations, so with very many organisations an index scan may return
-- fewer than k rows of one (org, model) after filtering: for a cache that is a miss, never a wrong hit.
CREATE TABLE semantic_cache (
  org_id     text NOT NULL,
  model      text NOT NULL,
  key        text NOT NULL,
  dims       integer NOT NULL CHECK (dims > 0),
  embedding  vector NOT NULL CHECK (vector_dims(embedding) = dims),
  payload    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NULL,
  UNIQUE (org_id, model, key)
);

CREATE INDEX semantic_cache_hnsw_256_idx ON semantic_cache
  USING hnsw ((embedding::vector(256)) vector_cosine_ops) WHERE dims = 256;
CREATE INDEX semantic_cache_hnsw_384_idx ON semantic_cache
  USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE dims = 384;
CREATE INDEX semantic_cache_hnsw_512_idx ON semantic_cache
  USING hnsw ((embedding::vector(512)) vector_cosine_ops) WHERE dims = 512;
CREATE INDEX semantic_cache_hnsw_768_idx ON semantic_cache
  USING hnsw ((embedding::vector(768)) vector_cosine_ops) WHERE dims = 768;
CREATE INDEX semantic_cache_hnsw_1024_idx ON semantic_cache
  USING hnsw ((embedding::vector(1024)) vector_cosine_ops) WHERE dims = 1024;
CREATE INDEX semantic_cache_hnsw_1536_idx ON semantic_cache
  USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WHERE dims = 1536;
CREATE INDEX semantic_cache_hnsw_3072_idx ON semantic_cache
  USING hnsw ((embedding::halfvec(3072)) halfvec_cosine_ops) WHERE dims = 3072;

-- Expired rows are skipped by every lookup; this index keeps a purge of them by time cheap.
CREATE INDEX semantic_cache_expires_idx ON semantic_cache (expires_at) WHERE expires_at IS NOT NULL;
