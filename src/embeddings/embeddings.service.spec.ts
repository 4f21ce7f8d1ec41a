import { thrownBy } from '../../test/support/kit';
import { AppConfig } from '../config/app-config';
import { loadEnv } from '../config/env';
import { loadGatewayConfig } from '../config/gateway-config';
import { ConfigError } from '../config/schema';
import { ProviderRegistry } from '../providers/provider-registry';
import { checkEmbeddingModels, resolveEmbeddingModel } from './embeddings.service';

const PROVIDERS = `
providers:
  openai: { family: openai, api_key: sk-x }
  spare: { family: openai, base_url: "http://127.0.0.1:9", api_key: sk-y }
  gemini: { family: gemini, api_key: g-x }
  anthropic: { family: anthropic, api_key: a-x }
  groq: { family: groq, api_key: q-x }
  mock: { family: mock }
`;

function load(models: string) {
  return loadGatewayConfig(`${PROVIDERS}models:\n${models}`, {});
}

/** The start-up check against the real adapters' declared capabilities. */
function check(models: string): void {
  const gateway = load(models);
  const registry = new ProviderRegistry(new AppConfig(loadEnv({}), gateway));
  try {
    checkEmbeddingModels(gateway, registry);
  } finally {
    registry.onApplicationShutdown();
  }
}

const configError = (models: string): string => thrownBy(() => check(models), ConfigError).message;

describe('checkEmbeddingModels (start-up)', () => {
  it('accepts embedding models on OpenAI-compatible families with embeddings, Gemini and mock, and chat models anywhere', () => {
    expect(() =>
      check(`
  small: { type: embedding, provider: openai, upstream: text-embedding-3-small }
  both: { type: embedding, providers: { openai: {}, spare: {} } }
  gem: { type: embedding, provider: gemini, upstream: gemini-embedding-001 }
  fake: { type: embedding, provider: mock }
  claude: { provider: anthropic }
  llama: { provider: groq }
`),
    ).not.toThrow();
  });

  it('refuses an embedding model on Anthropic, naming models.<id>.provider', () => {
    expect(configError(`  embed-claude: { type: embedding, provider: anthropic, upstream: claude-x }\n`)).toBe(
      'models.embed-claude.provider: provider "anthropic" (family anthropic) has no embeddings API, so it cannot serve the embedding model "embed-claude"',
    );
  });

  it('refuses an embedding model with one of several providers lacking embeddings (groq declares none), naming that provider', () => {
    expect(configError(`  mixed: { type: embedding, providers: { openai: {}, groq: {} } }\n`)).toMatch(/^models\.mixed\.providers\.groq: provider "groq" \(family groq\) has no embeddings API/);
  });
});

describe('resolveEmbeddingModel', () => {
  const models = load(`
  small: { type: embedding, providers: { openai: {}, spare: {} } }
  gem: { type: embedding, provider: gemini }
  claude: { provider: anthropic }
`).models;

  it('a catalogue id: each of its providers in order', () => {
    expect(resolveEmbeddingModel('small', models)).toEqual([
      { provider: 'openai', model: 'small' },
      { provider: 'spare', model: 'small' },
    ]);
  });

  it('provider/model: that provider only', () => {
    expect(resolveEmbeddingModel('spare/small', models)).toEqual([{ provider: 'spare', model: 'small' }]);
  });

  it.each([
    ['nope', 'The model "nope" does not exist.'],
    ['anthropic/small', 'The model "anthropic/small" does not exist.'],
    ['claude', 'The model "claude" is not an embedding model.'],
    ['anthropic/claude', 'The model "anthropic/claude" is not an embedding model.'],
    ['small,gem', 'The model "small,gem" does not exist.'],
  ])('%s cannot be served: %s', (name, message) => {
    expect(resolveEmbeddingModel(name, models)).toBe(message);
  });
});
