import type { ModelSpec, ProviderSpec } from '../../../src/config/gateway-config';
import type { AdapterCapabilities, ChatResult, ProviderAdapter, StreamEvent, UpstreamTarget } from '../../../src/providers/provider-adapter';

export const TIMEOUTS = { connectMs: 1_000, firstTokenMs: 2_000, idleMs: 300, totalMs: 10_000 };

/** Where one attempt goes: a provider of `family` (overrides as given), a chat catalogue model, `upstream` on the wire. */
export function makeTarget(provider: Partial<ProviderSpec> & Pick<ProviderSpec, 'family'>, upstream = 'fake-model', model: Partial<ModelSpec> = {}): UpstreamTarget {
  const p: ProviderSpec = { id: provider.family, headers: {}, timeouts: {}, ...provider };
  return {
    provider: p,
    model: { id: 'catalogue-model', type: 'chat', targets: [{ provider: p.id, upstream, timeouts: {} }], reasoning: { mode: 'none', can_disable: true, budgets: {} }, ...model },
    upstream,
    timeouts: TIMEOUTS,
    maxResponseBytes: 4 * 1024 * 1024,
  };
}

/** An adapter that answers every chat call with `result` and can do nothing else (a stream or an embedding is a test bug). */
export class FixedAdapter implements ProviderAdapter {
  constructor(private readonly result: ChatResult) {}

  capabilities(): AdapterCapabilities {
    return { embeddings: false, tools: true, multipleChoices: false, seed: true, images: true, jsonMode: true, jsonSchema: true, recursiveSchemas: true };
  }

  async chat(): Promise<ChatResult> {
    return this.result;
  }

  async chatStream(): Promise<AsyncIterable<StreamEvent>> {
    throw new Error('FixedAdapter does not stream');
  }
}
