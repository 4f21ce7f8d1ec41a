import { DEFAULT_MESSAGES, ERROR_CATALOGUE, ErrorCode } from './error-catalogue';

export interface GatewayErrorOptions {
  /** The request field at fault (contract error body `param`). */
  param?: string;
  /** Overrides the catalogue status; only 5xx codes may vary (e.g. 503 `internal` when a store is down). */
  status?: number;
  /** Extra fields of the error object (monthly limit: `limit`, `used`, `reset_at`). */
  extra?: Record<string, string | number>;
  /** Response headers (e.g. `Retry-After`). */
  headers?: Record<string, string>;
  cause?: unknown;
}

/** The gateway's own error: services throw this, the exception filter renders it. */
export class GatewayError extends Error {
  readonly status: number;
  readonly param?: string;
  readonly extra?: Record<string, string | number>;
  readonly headers?: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message?: string,
    opts: GatewayErrorOptions = {},
  ) {
    super(message ?? DEFAULT_MESSAGES[code], { cause: opts.cause });
    this.name = 'GatewayError';
    const base = ERROR_CATALOGUE[code];
    this.status = opts.status !== undefined && base >= 500 && opts.status >= 500 ? opts.status : base;
    this.param = opts.param;
    this.extra = opts.extra;
    this.headers = opts.headers;
  }

  /** The contract's standard error body (docs/api.md "Error body": `param` where a field is at fault). */
  toBody(): { error: Record<string, string | number> } {
    const error: Record<string, string | number> = { type: 'error', code: this.code, message: this.message };
    if (this.param !== undefined) error.param = this.param;
    if (this.extra) Object.assign(error, this.extra);
    return { error };
  }
}

/**
 * An error whose body is fixed by the contract and differs from the standard one: the embeddings
 * `model_not_found` (docs/api.md "Error body").
 */
export class ContractBodyError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super('contract error');
  }
}
