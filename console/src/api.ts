import { forgetKey, storedKey } from './session';

/** An error as the gateway states it (docs/api.md "Error body"): the console shows its message as is. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export type Query = Record<string, string | number | boolean | null | undefined>;

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  headers?: Record<string, string>;
  /** The key to send instead of the stored one (sign-in checks a key before keeping it). */
  key?: string;
  signal?: AbortSignal;
}

type UnauthorizedListener = (error: ApiError) => void;
let onUnauthorized: UnauthorizedListener = () => undefined;

/** Called when the API answers 401 to the stored key (revoked meanwhile): the console signs out. */
export function setUnauthorizedListener(listener: UnauthorizedListener): void {
  onUnauthorized = listener;
}

export function withQuery(path: string, query: Query | undefined): string {
  if (!query) return path;
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
  }
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

/**
 * One call to the gateway's API on this origin. The key travels in the Authorization header only;
 * no cookie is sent (credentials: omit) and nothing is cached.
 */
export async function api<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const key = opts.key ?? storedKey();
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  if (key) headers.authorization = `Bearer ${key}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res: Response;
  try {
    res = await fetch(withQuery(path, opts.query), { method, headers, body, cache: 'no-store', credentials: 'omit', redirect: 'error', signal: opts.signal });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'network', 'The gateway could not be reached.');
  }
  const text = await res.text();
  let json: unknown = undefined;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json as { error?: { code?: unknown; message?: unknown; param?: unknown } } | undefined)?.error;
    const error = new ApiError(
      res.status,
      typeof e?.code === 'string' ? e.code : `http_${res.status}`,
      typeof e?.message === 'string' ? e.message : `The gateway answered ${res.status}.`,
      typeof e?.param === 'string' ? e.param : undefined,
    );
    if (res.status === 401 && opts.key === undefined) {
      forgetKey();
      onUnauthorized(error);
    }
    throw error;
  }
  return json as T;
}

/** A page of an Admin API list (docs/api.md "Admin API", pagination). */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}
