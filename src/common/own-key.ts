/**
 * Maps keyed by strings a client or a config file chose (model, provider, org, template and route
 * ids, template inputs, header names) must answer for any string: a plain object answers
 * `constructor`, `toString` or `__proto__` from Object.prototype, which turned such a model name
 * into a 500. These maps are built without a prototype and read only through their own keys.
 */

/** An empty map with no prototype: assigning `__proto__` stores a key like any other. */
export function keyedMap<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

/** The value stored under `key`, never one inherited from Object.prototype. */
export function ownValue<T>(map: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(map, key) ? map[key] : undefined;
}
