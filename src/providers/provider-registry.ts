import { ownValue } from '../common/own-key';
import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import type { ProviderSpec, TargetRef, Timeouts } from '../config/gateway-config';
import type { ProviderFamily } from '../config/gateway-config.schema';
import { createAnthropicAdapter } from './anthropic/anthropic.adapter';
import { createGeminiAdapter } from './gemini/gemini.adapter';
import { UpstreamHttp } from './http/upstream-http';
import { createMockAdapter } from './mock/mock.adapter';
import { createOpenAiCompatibleAdapter } from './openai/openai.adapter';
import type { ProviderAdapter, ResolvedTimeouts, UpstreamTarget } from './provider-adapter';

type AdapterFactory = (http: UpstreamHttp) => ProviderAdapter;

/** One line per family: the config's `family` values. */
const FAMILIES = {
  openai: (http) => createOpenAiCompatibleAdapter(http, 'openai'),
  groq: (http) => createOpenAiCompatibleAdapter(http, 'groq'),
  azure: (http) => createOpenAiCompatibleAdapter(http, 'azure'),
  deepseek: (http) => createOpenAiCompatibleAdapter(http, 'deepseek'),
  mistral: (http) => createOpenAiCompatibleAdapter(http, 'mistral'),
  together: (http) => createOpenAiCompatibleAdapter(http, 'together'),
  openrouter: (http) => createOpenAiCompatibleAdapter(http, 'openrouter'),
  vllm: (http) => createOpenAiCompatibleAdapter(http, 'vllm'),
  ollama: (http) => createOpenAiCompatibleAdapter(http, 'ollama'),
  anthropic: (http) => createAnthropicAdapter(http),
  gemini: (http) => createGeminiAdapter(http),
  mock: () => createMockAdapter(),
} satisfies Record<ProviderFamily, AdapterFactory>;

/** Defaults when neither the model target, the model nor the provider sets a timeout. */
export const DEFAULT_TIMEOUTS: ResolvedTimeouts = { connectMs: 5_000, firstTokenMs: 60_000, idleMs: 30_000, totalMs: 600_000 };
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

function mergeTimeouts(...layers: Timeouts[]): ResolvedTimeouts {
  const pick = (k: keyof Timeouts) => layers.map((l) => l[k]).find((v) => v !== undefined);
  return {
    connectMs: pick('connect_ms') ?? DEFAULT_TIMEOUTS.connectMs,
    firstTokenMs: pick('first_token_ms') ?? DEFAULT_TIMEOUTS.firstTokenMs,
    idleMs: pick('idle_ms') ?? DEFAULT_TIMEOUTS.idleMs,
    totalMs: pick('total_ms') ?? DEFAULT_TIMEOUTS.totalMs,
  };
}

/**
 * The adapters of the configured providers and the resolution of a (provider, model) pair into an
 * upstream target: upstream name, timeouts (model target → provider → defaults) and size cap.
 */
@Injectable()
export class ProviderRegistry implements OnApplicationShutdown {
  private readonly http = new UpstreamHttp();
  private readonly adapters = new Map<ProviderFamily, ProviderAdapter>();
  private readonly targets = new Map<string, UpstreamTarget>();

  constructor(private readonly config: AppConfig) {}

  adapterFor(provider: ProviderSpec): ProviderAdapter {
    let a = this.adapters.get(provider.family);
    if (!a) {
      a = FAMILIES[provider.family](this.http);
      this.adapters.set(provider.family, a);
    }
    return a;
  }

  /** Resolved once per pair and cached: the config is frozen. */
  target(ref: TargetRef): UpstreamTarget {
    const k = `${ref.provider}\u0000${ref.model}`;
    let t = this.targets.get(k);
    if (!t) {
      const provider = ownValue(this.config.gateway.providers, ref.provider);
      const model = ownValue(this.config.gateway.models, ref.model);
      const mt = model?.targets.find((x) => x.provider === ref.provider);
      // Routing and experiments only build pairs the catalogue has; anything else is a bug, not a request's fault.
      if (!provider || !model || !mt) throw new Error(`no configured target ${ref.provider}/${ref.model}`);
      t = {
        provider,
        model,
        upstream: mt.upstream,
        timeouts: mergeTimeouts(mt.timeouts, provider.timeouts),
        maxResponseBytes: provider.max_response_bytes ?? DEFAULT_MAX_RESPONSE_BYTES,
        ...(mt.structured_output ? { structuredOutput: mt.structured_output } : {}),
      };
      this.targets.set(k, t);
    }
    return t;
  }

  onApplicationShutdown(): void {
    this.http.destroy();
  }
}
