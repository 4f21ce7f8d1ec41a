/**
 * Calls for the same key made while one is under way share it (its result or its failure); the key
 * is free again once that call settles, so a failure is never kept. For reads that many requests
 * miss at once: a key not cached yet, a counter not seeded yet.
 */
export class SingleFlight<K, V> {
  private readonly running = new Map<K, Promise<V>>();

  run(key: K, start: () => Promise<V>): Promise<V> {
    let call = this.running.get(key);
    if (call === undefined) {
      call = start().finally(() => this.running.delete(key));
      this.running.set(key, call);
    }
    return call;
  }
}
