import { GatewayError } from '../errors/gateway-error';

/**
 * Checks shared by the hand-written body validators (chat, embeddings, explain). Each failure is
 * 400 `invalid_request` with `param`; the messages are the contract's, asserted by the request specs.
 */

export const fail = (param: string, message: string): never => {
  throw new GatewayError('invalid_request', message, { param });
};

export const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** What a value is, for "must be a string, got …" messages. */
export const typeName = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);

export const absent = (v: unknown): v is undefined | null => v === undefined || v === null;

/** `body[key]` as a finite number in [min, max]; undefined when absent. */
export function num(body: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const v = body[key];
  if (absent(v)) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) return fail(key, `${key} must be a number, got ${typeName(v)}.`);
  if (v < min || v > max) return fail(key, `${key} must be between ${min} and ${max}, got ${v}.`);
  return v;
}

/** `body[key]` as an integer in [min, max]; undefined when absent. */
export function int(body: Record<string, unknown>, key: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = body[key];
  if (absent(v)) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) return fail(key, `${key} must be an integer, got ${typeName(v)}.`);
  if (v < min || v > max) return fail(key, `${key} must be between ${min} and ${max}, got ${v}.`);
  return v;
}

/** `body[key]` as a boolean; undefined when absent. */
export function bool(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (absent(v)) return undefined;
  if (typeof v !== 'boolean') return fail(key, `${key} must be a boolean.`);
  return v;
}

export function str(v: unknown, param: string, opts: { max?: number; nonEmpty?: boolean } = {}): string {
  if (typeof v !== 'string') return fail(param, `${param} must be a string, got ${typeName(v)}.`);
  if (opts.nonEmpty && v.length === 0) return fail(param, `${param} must not be empty.`);
  if (opts.max !== undefined && v.length > opts.max) return fail(param, `${param} must be at most ${opts.max} characters.`);
  return v;
}
