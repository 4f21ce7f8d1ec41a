/*
 * Kept apart from RedisCacheStore so that the resilience layer can classify errors without loading
 * `ioredis`, which a gateway on the in-process cache never uses.
 */

/**
 * True when a call's error says Redis cannot be reached or did not answer (no connection, a dropped
 * one, a timeout), false when Redis answered with an error of its own (a script's error reply) or the
 * caller's arguments were refused before anything was sent.
 */
export function isRedisOutage(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return err.name !== 'ReplyError' && !(err instanceof RangeError) && !(err instanceof TypeError);
}
