/**
 * The one error catalogue: code → HTTP status (docs/api.md "Errors"). Typed so that an
 * unknown code does not compile.
 */
export const ERROR_CATALOGUE = {
  invalid_request: 400,
  invalid_body: 400,
  body_too_large: 400,
  missing_confirmation: 400,
  invalid_traffic_pct: 400,
  missing_template_input: 400,
  firewall_blocked: 400,
  upstream_invalid_request: 400,
  invalid_api_key: 401,
  read_permission: 403,
  write_permission: 403,
  admin_permission: 403,
  plan_required: 403,
  model_not_allowed: 403,
  not_found: 404,
  no_route: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  active_already_exists: 409,
  completed_cannot_rollback: 409,
  config_managed_key: 409,
  config_managed_org: 409,
  rate_limited: 429,
  MONTHLY_LIMIT_EXCEEDED: 429,
  budget_exceeded: 429,
  internal: 500,
  upstream_error: 502,
  providers_unavailable: 503,
  upstream_timeout: 504,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Generic messages, used when a throw site gives none. They never carry internals. */
export const DEFAULT_MESSAGES: Record<ErrorCode, string> = {
  invalid_request: 'The request is invalid.',
  invalid_body: 'The request body is invalid.',
  body_too_large: 'The request body is too large.',
  missing_confirmation: 'The X-Gateway-Confirm header is missing or wrong.',
  invalid_traffic_pct: 'traffic_pct must be between 0 and 100.',
  missing_template_input: 'A template variable has no value in inputs.',
  firewall_blocked: 'The request was blocked by the gateway firewall.',
  upstream_invalid_request: 'The upstream provider rejected the request as invalid.',
  invalid_api_key: 'The API key is missing or invalid.',
  read_permission: 'This API key lacks the read permission.',
  write_permission: 'This API key lacks the write permission.',
  admin_permission: 'This API key lacks the admin permission.',
  plan_required: 'This feature is not enabled for the organisation.',
  model_not_allowed: 'This API key may not use this model.',
  not_found: 'Not found.',
  no_route: 'No routing rule applies to this organisation and model.',
  model_not_found: 'The model does not exist or no route serves it.',
  method_not_allowed: 'Method not allowed.',
  active_already_exists: 'An active experiment already exists for this baseline and candidate.',
  completed_cannot_rollback: 'A completed experiment cannot be rolled back.',
  config_managed_key: 'This key is managed by gateway.yaml and cannot be changed through the API.',
  config_managed_org: 'This organisation is managed by gateway.yaml and cannot be changed through the API.',
  rate_limited: 'Rate limit exceeded.',
  MONTHLY_LIMIT_EXCEEDED: 'The monthly request limit of the organisation is exhausted.',
  budget_exceeded: 'The monthly spend budget is exhausted.',
  internal: 'Internal error.',
  upstream_error: 'The upstream providers failed.',
  providers_unavailable: 'Every provider for this request is unavailable.',
  upstream_timeout: 'The upstream provider timed out.',
};

export function assertUnreachable(value: never): never {
  throw new Error(`unreachable: ${String(value)}`);
}
