/** Thrown when a store call does not answer in time (a dead store never hangs a request). */
export class StoreTimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} did not answer within ${ms} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/**
 * Resolves or rejects with `promise`, or rejects with StoreTimeoutError after `ms`.
 *
 * The rejection waits one more turn of the event loop after the timer fires. Timers run before
 * socket reads in each turn, so when this process itself stalled (a long garbage collection, a
 * starved CPU) past `ms`, the answer may already sit in the socket, unread, as the timer fires:
 * the extra turn lets it be read first, so a stall of our own is not taken for a store outage.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  let late: NodeJS.Immediate | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = setImmediate(() => reject(new StoreTimeoutError(what, ms)));
    }, ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => {
    clearTimeout(timer);
    if (late) clearImmediate(late);
  });
}
