import { UpstreamHttp } from '../http/upstream-http';
import { AnthropicAdapter, messagesUrl } from './anthropic.adapter';

describe('anthropic adapter', () => {
  it.each([
    [undefined, 'https://api.anthropic.com/v1/messages'],
    ['https://api.anthropic.com', 'https://api.anthropic.com/v1/messages'],
    ['https://proxy.internal/anthropic/', 'https://proxy.internal/anthropic/v1/messages'],
    ['https://proxy.internal/v1', 'https://proxy.internal/v1/messages'],
  ])('base URL %s → %s', (base, url) => {
    expect(messagesUrl(base)).toBe(url);
  });

  it('declares no embeddings, no n > 1, no seed, no JSON mode; tools, images and JSON schemas (forced tool) yes', () => {
    const http = new UpstreamHttp();
    expect(new AnthropicAdapter(http).capabilities({} as never)).toEqual({
      embeddings: false, tools: true, multipleChoices: false, seed: false, images: true, jsonMode: false, jsonSchema: true, recursiveSchemas: true,
    });
    http.destroy();
  });

  it.each([
    ['native', true, false],
    ['forced_tool', true, true],
    ['none', false, false],
  ] as const)('structured_output %s: jsonSchema %s, recursive schemas %s', (mode, jsonSchema, recursiveSchemas) => {
    const http = new UpstreamHttp();
    expect(new AnthropicAdapter(http).capabilities({ structuredOutput: mode } as never)).toMatchObject({ jsonSchema, recursiveSchemas });
    http.destroy();
  });
});
