import type { UpstreamTarget } from '../provider-adapter';
import type { OpenAiVariant } from './variants';

export type OpenAiOperation = 'chat/completions' | 'embeddings';

export interface Endpoint {
  url: string;
  /** False when the URL names the model (Azure deployment URLs); the body then carries none. */
  modelInBody: boolean;
}

/** Thrown when a family without a public default (Azure, vLLM) has no `base_url` configured. */
export class MissingBaseUrlError extends Error {
  constructor(providerId: string, family: string) {
    super(`provider "${providerId}" (family ${family}) needs base_url: the family has no default endpoint`);
    this.name = 'MissingBaseUrlError';
  }
}

export function baseUrlOf(target: UpstreamTarget, variant: OpenAiVariant): string {
  const base = target.provider.base_url ?? variant.defaultBaseUrl;
  if (!base) throw new MissingBaseUrlError(target.provider.id, variant.family);
  return base.replace(/\/+$/, '');
}

/**
 * The URL of one operation. Azure: the deployment URL with `api-version`
 * when the provider sets `api_version`, else the v1 GA path with the model in the body; a base given
 * as `…/openai` or `…/openai/v1` is accepted too.
 */
export function endpointFor(target: UpstreamTarget, variant: OpenAiVariant, op: OpenAiOperation): Endpoint {
  const base = baseUrlOf(target, variant);
  if (variant.urlShape === 'openai') return { url: `${base}/${op}`, modelInBody: true };
  const resource = base.replace(/\/openai(\/v1)?$/, '');
  const version = target.provider.api_version;
  if (!version) return { url: `${resource}/openai/v1/${op}`, modelInBody: true };
  const deployment = encodeURIComponent(target.upstream);
  return { url: `${resource}/openai/deployments/${deployment}/${op}?api-version=${encodeURIComponent(version)}`, modelInBody: false };
}

/** Auth and content negotiation; the provider's configured headers come last so they can override. */
export function headersFor(target: UpstreamTarget, variant: OpenAiVariant, stream: boolean): Record<string, string> {
  const headers: Record<string, string> = { accept: stream ? 'text/event-stream' : 'application/json' };
  const key = target.provider.api_key?.reveal();
  if (key) {
    if (variant.auth === 'api-key') headers['api-key'] = key;
    else headers.authorization = `Bearer ${key}`;
  }
  return { ...headers, ...target.provider.headers };
}
