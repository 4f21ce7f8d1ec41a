import type { ProviderSpec } from '../../config/gateway-config';
import { PROVIDER_FAMILIES } from '../../config/gateway-config.schema';
import { Secret } from '../../config/secret';
import { UpstreamHttp } from '../http/upstream-http';
import type { UpstreamTarget } from '../provider-adapter';
import { createOpenAiCompatibleAdapter } from './openai.adapter';
import { endpointFor, headersFor, MissingBaseUrlError } from './openai.endpoint';
import { OPENAI_COMPATIBLE_FAMILIES, OpenAiCompatibleFamily, VARIANTS } from './variants';

function target(family: OpenAiCompatibleFamily, provider: Partial<ProviderSpec> = {}, upstream = 'my-model'): UpstreamTarget {
  return {
    provider: { id: `p-${family}`, family, headers: {}, timeouts: {}, ...provider },
    model: { id: 'cat', type: 'chat', targets: [], reasoning: { mode: 'none', can_disable: true, budgets: {} } },
    upstream,
    timeouts: { connectMs: 1, firstTokenMs: 1, idleMs: 1, totalMs: 1 },
    maxResponseBytes: 1,
  };
}

describe('variants', () => {
  it('every OpenAI-compatible family is a config family', () => {
    for (const f of OPENAI_COMPATIBLE_FAMILIES) expect(PROVIDER_FAMILIES).toContain(f);
    expect(Object.keys(VARIANTS).sort()).toEqual([...OPENAI_COMPATIBLE_FAMILIES].sort());
  });

  it('declares capabilities per family', () => {
    const table = Object.fromEntries(
      OPENAI_COMPATIBLE_FAMILIES.map((f) => {
        const c = createOpenAiCompatibleAdapter(new UpstreamHttp(), f).capabilities(target(f));
        return [f, `${c.tools ? 'T' : '-'}${c.multipleChoices ? 'N' : '-'}${c.seed ? 'S' : '-'}${c.images ? 'I' : '-'}${c.jsonMode ? 'J' : '-'}${c.embeddings ? 'E' : '-'}`];
      }),
    );
    expect(table).toEqual({
      openai: 'TNSIJE', azure: 'TNSIJE', groq: 'T-S-J-', deepseek: 'T---J-', mistral: 'T-S-JE', together: 'TNS-JE', openrouter: 'T-SIJE', vllm: 'TNSIJE', ollama: 'T-SIJE',
    });
  });
});

describe('structured outputs', () => {
  const jsonSchema = (f: OpenAiCompatibleFamily, t = target(f)) => createOpenAiCompatibleAdapter(new UpstreamHttp(), f).capabilities(t).jsonSchema;

  it('json_schema is passed through by default where every model of the family takes it, opted into elsewhere', () => {
    expect(Object.fromEntries(OPENAI_COMPATIBLE_FAMILIES.map((f) => [f, jsonSchema(f)]))).toEqual({
      openai: true, azure: true, groq: false, deepseek: false, mistral: true, together: false, openrouter: false, vllm: true, ollama: true,
    });
  });

  it("the model's structured_output wins over the family default", () => {
    expect(jsonSchema('groq', { ...target('groq'), structuredOutput: 'native' })).toBe(true);
    expect(jsonSchema('openai', { ...target('openai'), structuredOutput: 'none' })).toBe(false);
  });
});

describe('endpointFor', () => {
  it.each([
    ['openai', 'https://api.openai.com/v1/chat/completions'],
    ['groq', 'https://api.groq.com/openai/v1/chat/completions'],
    ['deepseek', 'https://api.deepseek.com/chat/completions'],
    ['mistral', 'https://api.mistral.ai/v1/chat/completions'],
    ['together', 'https://api.together.xyz/v1/chat/completions'],
    ['openrouter', 'https://openrouter.ai/api/v1/chat/completions'],
    ['ollama', 'http://localhost:11434/v1/chat/completions'],
  ] as const)('%s defaults to %s', (family, url) => {
    expect(endpointFor(target(family), VARIANTS[family], 'chat/completions')).toEqual({ url, modelInBody: true });
  });

  it('a configured base URL wins; trailing slashes are dropped', () => {
    expect(endpointFor(target('vllm', { base_url: 'http://gpu:8000/v1/' }), VARIANTS.vllm, 'embeddings').url).toBe('http://gpu:8000/v1/embeddings');
    expect(endpointFor(target('openai', { base_url: 'http://proxy/v1' }), VARIANTS.openai, 'chat/completions').url).toBe('http://proxy/v1/chat/completions');
  });

  it.each(['azure', 'vllm'] as const)('%s without base_url is a clear configuration error', (family) => {
    expect(() => endpointFor(target(family), VARIANTS[family], 'chat/completions')).toThrow(MissingBaseUrlError);
    expect(() => endpointFor(target(family), VARIANTS[family], 'chat/completions')).toThrow(`provider "p-${family}" (family ${family}) needs base_url`);
  });

  it('azure: the deployment URL with api-version when api_version is set', () => {
    const t = target('azure', { base_url: 'https://res.openai.azure.com', api_version: '2024-10-21' }, 'gpt 4o/prod');
    expect(endpointFor(t, VARIANTS.azure, 'chat/completions')).toEqual({
      url: 'https://res.openai.azure.com/openai/deployments/gpt%204o%2Fprod/chat/completions?api-version=2024-10-21',
      modelInBody: false,
    });
    expect(endpointFor(t, VARIANTS.azure, 'embeddings').url).toBe('https://res.openai.azure.com/openai/deployments/gpt%204o%2Fprod/embeddings?api-version=2024-10-21');
  });

  it('azure: the v1 GA path with the model in the body without api_version', () => {
    expect(endpointFor(target('azure', { base_url: 'https://res.openai.azure.com/' }), VARIANTS.azure, 'chat/completions')).toEqual({
      url: 'https://res.openai.azure.com/openai/v1/chat/completions',
      modelInBody: true,
    });
  });

  it.each(['https://res.openai.azure.com/openai', 'https://res.openai.azure.com/openai/v1'])('azure: a base given as %s is accepted', (baseUrl) => {
    expect(endpointFor(target('azure', { base_url: baseUrl }), VARIANTS.azure, 'chat/completions').url).toBe('https://res.openai.azure.com/openai/v1/chat/completions');
  });
});

describe('headersFor', () => {
  it('Bearer key for every family but azure, which uses api-key', () => {
    for (const f of OPENAI_COMPATIBLE_FAMILIES) {
      const h = headersFor(target(f, { api_key: new Secret('k-1') }), VARIANTS[f], false);
      if (f === 'azure') expect(h).toEqual({ accept: 'application/json', 'api-key': 'k-1' });
      else expect(h).toEqual({ accept: 'application/json', authorization: 'Bearer k-1' });
    }
  });

  it('no key, no auth header; streams accept text/event-stream; configured headers come last', () => {
    expect(headersFor(target('ollama'), VARIANTS.ollama, true)).toEqual({ accept: 'text/event-stream' });
    const h = headersFor(target('azure', { api_key: new Secret('k'), headers: { authorization: 'Bearer entra-token', 'x-title': 'gw' } }), VARIANTS.azure, false);
    expect(h).toEqual({ accept: 'application/json', 'api-key': 'k', authorization: 'Bearer entra-token', 'x-title': 'gw' });
  });
});
