import { SqlExecutor, SqlResult, SqlStore } from '../../src/stores/sql/sql-store';

/**
 * A real analytics store that can be switched off (every call rejects, as during a Postgres outage,
 * with the socket error code the pg client gives) or slowed down, and that counts what it was
 * asked: fakes over mocks.
 */
export class SwitchableSql extends SqlStore {
  down = false;
  /** Added before each call answers. */
  delayMs = 0;
  queries = 0;
  /** The SQL of every query sent outside a transaction, in order. */
  readonly statements: string[] = [];
  transactions = 0;
  /** Transactions open right now, and the most seen at once. */
  open = 0;
  maxOpen = 0;

  constructor(private readonly inner: SqlStore) {
    super();
  }

  get kind() {
    return this.inner.kind;
  }

  async query<R extends object>(sql: string, params?: readonly unknown[]): Promise<SqlResult<R>> {
    this.queries++;
    this.statements.push(sql);
    await this.gate();
    return this.inner.query<R>(sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.transactions++;
    this.open++;
    this.maxOpen = Math.max(this.maxOpen, this.open);
    try {
      await this.gate();
      return await this.inner.transaction(fn);
    } finally {
      this.open--;
    }
  }

  ping(ms: number): Promise<void> {
    return this.inner.ping(ms);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async gate(): Promise<void> {
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.down) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432 (analytics store down)'), { code: 'ECONNREFUSED' });
  }
}
