import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Refuses, instead of deadlocking on, a call on a one-connection store (PGlite) from inside its own
 * transaction: that call would wait for the transaction, which waits for it.
 *
 * An enabled AsyncLocalStorage turns on Node's promise hooks for every promise of the process
 * (a few % of a chat request's CPU in the benchmark's profile), so it is enabled only while a transaction is
 * open; transactions here are rare (migrations, seeding, experiment changes, regressions).
 */
export class TransactionScope {
  private readonly current = new AsyncLocalStorage<{ open: boolean }>();
  private open = 0;

  /** Throws when the caller runs inside one of this store's open transactions. */
  refuseInside(): void {
    if (this.current.getStore()?.open) {
      throw new Error('PGlite store called from inside its own transaction(): use the `tx` executor, the store would wait for the transaction forever');
    }
  }

  /** Runs `fn` marked as inside a transaction; `scope.open` turns false when the transaction ends. */
  async run<T>(fn: (scope: { open: boolean }) => Promise<T>): Promise<T> {
    const scope = { open: true };
    this.open++;
    try {
      return await this.current.run(scope, () => fn(scope));
    } finally {
      scope.open = false;
      // Work that outlives the transaction sees no store (or a closed scope) and may use the store.
      if (--this.open === 0) this.current.disable();
    }
  }
}

export const TRANSACTION_FINISHED = 'transaction is already finished; use the store, not its transaction, after transaction() returns';
