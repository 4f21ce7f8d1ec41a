/**
 * Sets `key` in a Map used as a bounded cache: the key moves to the end of the Map's order (its
 * insertion order, which is the eviction order), and the oldest entries go first while the map
 * holds `max` or more. One helper for the process's in-memory caches (key cache, key hashes,
 * limits, active experiments, the memory cache store).
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  while (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
}
