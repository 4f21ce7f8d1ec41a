import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors/gateway-error';

export interface JsonBodyOptions {
  /** Largest accepted body in bytes; one byte more is 400 `body_too_large`. */
  limit: number;
  /** The code for a body that is not acceptable JSON (contract: `invalid_body` or `invalid_request`). */
  invalidCode: 'invalid_body' | 'invalid_request';
}

export const MAX_JSON_DEPTH = 64;
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor']);

/** Reads the raw body up to `limit` bytes; rejects as soon as it is known to be larger. */
export function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(new GatewayError('invalid_request', 'The request body could not be read.', { cause: err }));
    };
    const onAborted = () => onError(new Error('request aborted'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError('body_too_large', `The request body exceeds the limit of ${limit} bytes.`, {
    // The rest of the body is not read; closing the connection stops the client from sending it.
    headers: { Connection: 'close' },
  });
}

/**
 * Parses JSON text and refuses what a later step could turn into a 500 or a prototype pollution:
 * nesting deeper than 64 levels and `__proto__` / `constructor` keys.
 */
export function parseJsonSafely(raw: Buffer | string, invalidCode: JsonBodyOptions['invalidCode']): unknown {
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new GatewayError(invalidCode, 'The request body is not valid JSON.');
  }
  // Iterative walk: a recursive one could itself overflow the stack on hostile input.
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > MAX_JSON_DEPTH) {
      throw new GatewayError(invalidCode, `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`);
    }
    if (Array.isArray(node)) {
      for (const item of node) if (item !== null && typeof item === 'object') stack.push([item, depth + 1]);
      continue;
    }
    for (const key of Object.keys(node)) {
      if (FORBIDDEN_KEYS.has(key)) throw new GatewayError(invalidCode, `The key "${key}" is not allowed in a request body.`);
      const child = (node as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return value;
}
