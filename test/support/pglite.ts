/**
 * Migrated PGlite instances for tests, fast. Starting PGlite and migrating takes seconds, and jest
 * gives every test file a fresh module registry, so an in-memory cache would not outlive one file.
 * Instead the first caller dumps a migrated instance to a tarball in the temp dir, keyed by the PGlite
 * version and the content of every migration file; later callers (any worker, any run) load a clone
 * from it, which takes well under a second.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ANALYTICS_MIGRATIONS, readMigrations, runMigrations } from '../../src/stores/sql/migrator';
import { PgliteSqlStore } from '../../src/stores/sql/pglite-sql.store';
import { VECTOR_MIGRATIONS } from '../../src/stores/vector/sql-vector.store';

const CACHE_DIR = join(tmpdir(), 'routing-gateway-test-pglite');

function templateKey(migrated: boolean): string {
  const h = createHash('sha256');
  for (const pkg of ['@electric-sql/pglite', '@electric-sql/pglite-pgvector']) {
    // package.json is not in the packages' `exports`; it sits one level above the resolved dist/ entry.
    h.update(JSON.parse(readFileSync(join(dirname(require.resolve(pkg)), '..', 'package.json'), 'utf8')).version);
  }
  h.update(migrated ? 'migrated' : 'empty');
  if (migrated) for (const set of [ANALYTICS_MIGRATIONS, VECTOR_MIGRATIONS]) for (const m of readMigrations(set.dir)) h.update(m.sql);
  return h.digest('hex').slice(0, 16);
}

async function buildTemplate(file: string, migrated: boolean): Promise<void> {
  const store = await PgliteSqlStore.create();
  try {
    if (migrated) {
      await runMigrations(store, ANALYTICS_MIGRATIONS);
      await runMigrations(store, VECTOR_MIGRATIONS);
    }
    const dump = await store.db.dumpDataDir('none');
    mkdirSync(CACHE_DIR, { recursive: true });
    // Write then rename: a concurrent worker either sees the whole file or none.
    const partial = `${file}.${process.pid}.${Date.now()}.partial`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, file);
  } finally {
    await store.close();
  }
}

/**
 * An in-memory PGlite store: `migrated` (default) has both the analytics and the vector migrations
 * applied; otherwise it is an empty database, for migration tests.
 */
export async function createTestPglite(options: { migrated?: boolean } = {}): Promise<PgliteSqlStore> {
  return PgliteSqlStore.create({ loadDataDir: new Blob([await pgliteTemplate(options)]) });
}

/** The dump a test PGlite starts from (see createTestPglite), e.g. for PgliteWorkerSqlStore's `loadDataDir`. */
export async function pgliteTemplate(options: { migrated?: boolean } = {}): Promise<Buffer> {
  const migrated = options.migrated ?? true;
  const file = join(CACHE_DIR, `${templateKey(migrated)}.tar`);
  if (!existsSync(file)) await buildTemplate(file, migrated);
  return readFileSync(file);
}
