/** The options a caller left undefined dropped, so spreading them over defaults keeps the defaults. */
export function stripUndefined<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}
