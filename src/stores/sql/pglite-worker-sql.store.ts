import { access } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { withTimeout } from '../with-timeout';
import { PgliteDirLock } from './pglite-dir-lock';
import { SqlStore, type SqlExecutor, type SqlResult } from './sql-store';
import { TRANSACTION_FINISHED, TransactionScope } from './transaction-scope';

export interface PgliteWorkerOptions {
  /** Folder of the database files, locked for this process until close (PgliteDirLock); omitted = in memory (tests), no lock. */
  dataDir?: string;
  /** Start from a dump of another instance (`dumpDataDir()`), e.g. a migrated test template. */
  loadDataDir?: Uint8Array;
}

/*
 * The worker, as source text (run with `eval`: no file to locate in src/, dist/ or under jest). It
 * owns the one PGlite connection and runs one message at a time; while a transaction is open only
 * that transaction's messages run, the others wait in arrival order (as PGlite's own transaction
 * mutex does in-process). Parameterless SQL runs as a script, as PgliteSqlStore and `pg` do.
 */
const WORKER_SOURCE = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
// Background work: on Linux a thread has its own nice value, so this one yields the CPU to the event
// loop's thread when both want it (requests and streams first, trace batches and aggregation after).
try {
  const tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  if (tid > 0) require('node:os').setPriority(tid, workerData.nice);
} catch {
  // Not Linux, or not allowed: the thread keeps the process's priority.
}
const { PGlite } = require(workerData.pglitePath);
const { vector } = require(workerData.vectorPath);

const queue = [];
let running = false;
let tx = null;
let db;

function errorFields(err) {
  const out = { message: String((err && err.message) || err) };
  if (err && typeof err === 'object') {
    for (const [k, v] of Object.entries(err)) if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v;
  }
  return out;
}

function toResult(res) {
  return { rows: res.rows, rowCount: res.affectedRows || res.rows.length };
}

async function handle(m) {
  switch (m.op) {
    case 'query': {
      if (m.params.length === 0) {
        const results = await db.exec(m.sql);
        return results.length ? toResult(results[results.length - 1]) : { rows: [], rowCount: 0 };
      }
      return toResult(await db.query(m.sql, m.params));
    }
    case 'begin':
      await db.exec('BEGIN');
      tx = m.tx;
      return null;
    case 'commit':
    case 'rollback':
      try {
        await db.exec(m.op === 'commit' ? 'COMMIT' : 'ROLLBACK');
      } catch (err) {
        await db.exec('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        tx = null;
      }
      return null;
    case 'close':
      if (!db.closed) await db.close();
      return null;
  }
  throw new Error('unknown operation ' + m.op);
}

async function pump() {
  if (running) return;
  running = true;
  try {
    for (;;) {
      const i = tx === null ? (queue.length ? 0 : -1) : queue.findIndex((m) => m.tx === tx);
      if (i < 0) break;
      const m = queue.splice(i, 1)[0];
      try {
        parentPort.postMessage({ id: m.id, ok: true, value: await handle(m) });
      } catch (err) {
        parentPort.postMessage({ id: m.id, ok: false, error: errorFields(err) });
      }
      if (m.op === 'close') {
        parentPort.close();
        return;
      }
    }
  } finally {
    running = false;
  }
}

(async () => {
  try {
    db = await PGlite.create({
      dataDir: workerData.dataDir,
      loadDataDir: workerData.loadDataDir ? new Blob([workerData.loadDataDir]) : undefined,
      extensions: { vector },
      parsers: { 1082: (s) => s },
      // Postgres's default 128 MB of shared buffers is most of an idle gateway's memory; the embedded
      // store's working set (recent traces, the stats table) is far smaller.
      startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=' + workerData.sharedBuffers],
    });
  } catch (err) {
    parentPort.postMessage({ id: 0, ok: false, error: errorFields(err) });
    return;
  }
  parentPort.on('message', (m) => {
    queue.push(m);
    void pump();
  });
  // A Date as the value: the caller learns whether dates arrive as its own realm's.
  parentPort.postMessage({ id: 0, ok: true, value: new Date(0) });
})();
`;

/**
 * The embedded database's WebAssembly (Postgres, 9 MB) is run as V8's baseline compiler (Liftoff)
 * makes it, without tiering its hot functions up to the optimising compiler. The optimised code and
 * the compiler's working memory (left in the malloc arenas of V8's background threads, which never
 * give it back) were ≈ 100 MiB of an idle embedded gateway's ≈ 375 MiB RSS. The price is CPU on
 * the store's own thread: `npm run bench:ab` with and without the flag, same run, 5 × 5 s per side:
 * RSS after the load 487 → 390 MiB; CPU per chat request 621 → 675 µs at 32 connections (+8.5 %,
 * the store's thread 193 → 237) and 750 → 805 µs at 1 (+6 %). The embedded default is the store of
 * a first run and of small installations, where memory matters more than tens of microseconds per
 * request; busy ones run Postgres, which this does not touch. The flag is the process's (the only
 * WebAssembly it runs is this), set before the first worker compiles the module.
 */
let wasmBaselineSet = false;
function baselineWasmOnly(): void {
  if (wasmBaselineSet) return;
  wasmBaselineSet = true;
  setFlagsFromString('--liftoff-only');
}

/*
 * The store's memory, measured on an idle embedded gateway after a load (smaps of the process):
 * Postgres's shared buffers live in the WebAssembly memory, which never shrinks: 32 MB of them left
 * ≈ 52 MiB of it resident, 16 MB ≈ 34. The worker's own JavaScript is small (its messages and
 * results), but V8 grows a thread's young generation to 16 MiB under load as it does the main
 * thread's; capped here, since the worker's allocations are short-lived and few.
 */
const SHARED_BUFFERS = '16MB';
const WORKER_YOUNG_GENERATION_MB = 4;

const RESTART_MIN_MS = 1_000;
const RESTART_MAX_MS = 30_000;

type Message =
  | { op: 'query'; sql: string; params: readonly unknown[]; tx?: number }
  | { op: 'begin' | 'commit' | 'rollback'; tx: number }
  | { op: 'close' };

interface Reply {
  id: number;
  ok: boolean;
  value?: unknown;
  error?: Record<string, unknown> & { message: string };
}

/** A worker's error as an Error again, with the database's fields (`code` = SQLSTATE, `detail`, …). */
function revive(fields: Reply['error']): Error {
  const err = new Error(fields?.message ?? 'embedded database error');
  Object.assign(err, fields);
  return err;
}

const isForeignDate = (v: unknown): boolean => !(v instanceof Date) && typeof v === 'object' && v !== null && Object.prototype.toString.call(v) === '[object Date]';

/**
 * Column values that are dates become this realm's Date: what crosses the thread boundary is a
 * structured clone, and code that checks `instanceof Date` in another realm (a vm context, as under
 * jest) would not recognise it. Only used when the worker's ready probe shows that is the case.
 */
function reviveRows(result: SqlResult<Record<string, unknown>>): SqlResult<Record<string, unknown>> {
  for (const row of result.rows) {
    for (const k in row) {
      const v = row[k];
      if (isForeignDate(v)) row[k] = new Date((v as Date).getTime());
    }
  }
  return result;
}

/**
 * The embedded analytics store of a running gateway (no DATABASE_URL): PGlite, as
 * PgliteSqlStore, but in a worker thread. PGlite is Postgres compiled to WebAssembly and runs on the
 * thread that calls it: in-process, every trace batch (≈ 20 ms for 500 rows) and every beat of the
 * aggregation job (≈ 250 ms over 100,000 traces) stopped the event loop and every request and stream
 * with it (they were the p99 of the chat benchmark and the between-chunk p99 of streams:
 * docs/architecture.md "Embedded PGlite in a worker thread"). Here they run
 * beside the event loop. The same SqlStore contract suite runs on both.
 *
 * Tests and tools that want a dump of the database (`dumpDataDir`) use PgliteSqlStore.
 */
export class PgliteWorkerSqlStore extends SqlStore {
  readonly kind = 'pglite' as const;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly scope = new TransactionScope();
  private worker!: Worker;
  private nextId = 1;
  private nextTx = 1;
  /** Why calls fail at once: the worker died (until it is restarted) or the store was closed. */
  private dead: Error | undefined;
  private closed = false;
  private restartDelayMs = RESTART_MIN_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  /** The database was open once: a worker that dies after that is restarted (file-backed stores). */
  private opened = false;
  private restarting = false;
  /** Dates from the worker are not this realm's Date (under jest's vm): rows are revived (reviveRows). */
  private foreignDates = false;

  /**
   * The directory lock is the process's, not a worker's: it is held across worker restarts and
   * reopen(), so no other process can slip in while no worker has the database open.
   */
  private constructor(
    private readonly options: PgliteWorkerOptions,
    private readonly lock: PgliteDirLock | undefined,
  ) {
    super();
  }

  /** Rejects with PgliteDirLockedError when another process has `dataDir` open. */
  static async create(options: PgliteWorkerOptions = {}): Promise<PgliteWorkerSqlStore> {
    return PgliteDirLock.openWith(options.dataDir, async (lock) => {
      // libuv's thread pool (file system, DNS, zlib of the whole process) starts on first use, from the
      // thread that uses it first, and its threads inherit that thread's nice value: start it here, so
      // it is not the worker's lowered priority that it inherits.
      await access('.').catch(() => undefined);
      const store = new PgliteWorkerSqlStore(options, lock);
      await store.start();
      return store;
    });
  }

  /**
   * Closes the database and opens it again in a new worker (its memory starts afresh). Only for when
   * nothing else uses the store, e.g. right after creating the database.
   */
  async reopen(): Promise<void> {
    this.restarting = true; // the old worker's exit is not a crash to recover from
    try {
      // The database is flushed and closed before the thread goes.
      await withTimeout(this.call({ op: 'close' }), 10_000, 'PGlite close').catch(() => undefined);
      await this.worker.terminate();
      await this.start();
    } finally {
      this.restarting = false;
    }
  }

  /** For tests: stops the worker as a crash would. */
  crashForTest(): Promise<number> {
    return this.worker.terminate();
  }

  /** Starts a worker and resolves when its database is open; rejects (and stops it) when it cannot open. */
  private async start(): Promise<void> {
    baselineWasmOnly();
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        pglitePath: require.resolve('@electric-sql/pglite'),
        vectorPath: require.resolve('@electric-sql/pglite-pgvector'),
        dataDir: this.options.dataDir,
        loadDataDir: this.options.loadDataDir,
        sharedBuffers: SHARED_BUFFERS,
        nice: 10,
      },
      resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
    });
    this.worker = worker;
    // Reply 0: the database is open (or could not be).
    const ready = new Promise((resolve, reject) => this.pending.set(0, { resolve, reject }));
    worker.on('message', (r: Reply) => worker === this.worker && this.settle(r));
    worker.on('error', (err) => worker === this.worker && this.die(err));
    worker.on('exit', (code) => worker === this.worker && this.die(new Error(`the embedded database worker stopped (exit code ${code})`)));
    let probe: unknown;
    try {
      probe = await ready;
    } catch (err) {
      await worker.terminate();
      throw err;
    }
    this.foreignDates = !(probe instanceof Date);
    this.dead = undefined;
    this.opened = true;
  }

  async query<R extends object = Record<string, unknown>>(sql: string, params: readonly unknown[] = []): Promise<SqlResult<R>> {
    this.scope.refuseInside();
    return this.send<R>(sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.scope.refuseInside();
    const tx = this.nextTx++;
    await this.call({ op: 'begin', tx });
    let result: T;
    try {
      result = await this.scope.run((scope) =>
        fn({
          query: async <R extends object>(sql: string, params: readonly unknown[] = []) => {
            if (!scope.open) throw new Error(TRANSACTION_FINISHED);
            return this.send<R>(sql, params, tx);
          },
        }),
      );
    } catch (err) {
      await this.call({ op: 'rollback', tx }).catch(() => undefined);
      throw err;
    }
    await this.call({ op: 'commit', tx });
    return result;
  }

  async ping(timeoutMs: number): Promise<void> {
    // Bounded: a long transaction or a long aggregation holds the only connection.
    await withTimeout(this.query('SELECT 1'), timeoutMs, 'PGlite');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.restartTimer);
    if (!this.dead) await this.call({ op: 'close' }).catch(() => undefined);
    this.dead = new Error('the embedded database is closed');
    try {
      await this.worker.terminate();
    } finally {
      // Only now is no thread of this process left with the database open.
      this.lock?.release();
    }
  }

  private async send<R>(sql: string, params: readonly unknown[], tx?: number): Promise<SqlResult<R>> {
    const result = (await this.call({ op: 'query', sql, params: [...params], tx })) as SqlResult<R>;
    return this.foreignDates ? (reviveRows(result as SqlResult<Record<string, unknown>>) as SqlResult<R>) : result;
  }

  private call(message: Message): Promise<unknown> {
    if (this.dead) return Promise.reject(this.dead);
    if (this.closed && message.op !== 'close') return Promise.reject(new Error('the embedded database is closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, ...message });
    });
  }

  private settle(r: Reply): void {
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (this.pending.size === 0) this.worker.unref();
    if (r.ok) p.resolve(r.value);
    else p.reject(revive(r.error));
  }

  /**
   * The worker is gone: everything waiting fails, and so does every call until a new worker has the
   * database open again (health shows the store down meanwhile). A file-backed store restarts it with
   * a back-off (1 s doubling to 30 s); an in-memory one (tests) has nothing to reopen.
   */
  private die(err: Error): void {
    this.dead = this.closed ? new Error('the embedded database is closed') : err;
    for (const p of this.pending.values()) p.reject(this.dead);
    this.pending.clear();
    if (!this.closed && this.opened && !this.restarting && this.options.dataDir) this.scheduleRestart();
  }

  private scheduleRestart(): void {
    this.restarting = true;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(RESTART_MAX_MS, this.restartDelayMs * 2);
    this.restartTimer = setTimeout(() => {
      if (this.closed) return;
      this.start().then(
        () => {
          this.restarting = false;
          this.restartDelayMs = RESTART_MIN_MS;
        },
        () => this.scheduleRestart(),
      );
    }, delay);
    this.restartTimer.unref();
  }
}
