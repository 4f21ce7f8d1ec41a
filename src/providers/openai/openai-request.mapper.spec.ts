import type { ModelSpec, ProviderSpec, ReasoningSpec } from '../../config/gateway-config';
import type { ChatRequest, ReasoningEffort, UpstreamTarget } from '../provider-adapter';
import { alnum9, toWireEmbeddingRequest, toWireRequest } from './openai-request.mapper';
import { OPENAI_COMPATIBLE_FAMILIES, OpenAiCompatibleFamily, VARIANTS } from './variants';

function target(family: OpenAiCompatibleFamily, reasoning: Partial<ReasoningSpec> = {}, model: Partial<ModelSpec> = {}): UpstreamTarget {
  const provider: ProviderSpec = { id: family, family, headers: {}, timeouts: {} };
  return {
    provider,
    model: { id: 'cat', type: 'chat', targets: [], reasoning: { mode: 'none', can_disable: true, budgets: {}, ...reasoning }, ...model },
    upstream: 'up-model',
    timeouts: { connectMs: 1, firstTokenMs: 1, idleMs: 1, totalMs: 1 },
    maxResponseBytes: 1,
  };
}

const REQ: ChatRequest = {
  messages: [
    { role: 'developer', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
  ],
  max_completion_tokens: 100,
};

const wire = (family: OpenAiCompatibleFamily, req: ChatRequest = REQ, stream = false, t = target(family)) =>
  toWireRequest(req, t, VARIANTS[family], { stream, modelInBody: true });

describe('toWireRequest', () => {
  it('passes response_format json_schema through unchanged ($defs, strict and description kept)', () => {
    const response_format: ChatRequest['response_format'] = {
      type: 'json_schema',
      json_schema: { name: 'person', description: 'A person', strict: true, schema: { type: 'object', properties: { a: { $ref: '#/$defs/A' } }, required: ['a'], additionalProperties: false, $defs: { A: { type: 'string' } } } },
    };
    for (const family of ['openai', 'azure', 'mistral', 'vllm', 'ollama', 'groq'] as const) {
      expect(wire(family, { ...REQ, response_format }).response_format).toEqual(response_format);
    }
  });

  it('maps the normalised request for openai field by field', () => {
    const req: ChatRequest = {
      ...REQ,
      temperature: 0.2, top_p: 0.9, frequency_penalty: 0.1, presence_penalty: -0.1, stop: ['\n\n'], seed: 7, n: 2, user: 'u-1',
      response_format: { type: 'json_object' },
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }],
      tool_choice: 'required', parallel_tool_calls: false,
    };
    expect(wire('openai', req)).toEqual({
      model: 'up-model',
      messages: REQ.messages,
      max_completion_tokens: 100,
      temperature: 0.2, top_p: 0.9, frequency_penalty: 0.1, presence_penalty: -0.1, stop: ['\n\n'], seed: 7, n: 2, user: 'u-1',
      response_format: { type: 'json_object' },
      tools: req.tools,
      tool_choice: 'required', parallel_tool_calls: false,
    });
  });

  it.each([
    ['openai', 'max_completion_tokens'], ['azure', 'max_completion_tokens'], ['groq', 'max_completion_tokens'],
    ['deepseek', 'max_tokens'], ['mistral', 'max_tokens'], ['together', 'max_tokens'], ['openrouter', 'max_tokens'], ['vllm', 'max_tokens'], ['ollama', 'max_tokens'],
  ] as const)('%s sends the token limit as %s', (family, param) => {
    const body = wire(family);
    expect(body[param]).toBe(100);
    expect(body).not.toHaveProperty(param === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens');
  });

  it.each(OPENAI_COMPATIBLE_FAMILIES.map((f) => [f, f === 'openai' || f === 'azure' ? 'developer' : 'system']))('%s sends the developer role as %s', (family, role) => {
    expect(wire(family as OpenAiCompatibleFamily).messages[0]).toEqual({ role, content: 'Be brief.' });
  });

  it('omits the model on Azure deployment URLs', () => {
    expect(toWireRequest(REQ, target('azure'), VARIANTS.azure, { stream: false, modelInBody: false })).not.toHaveProperty('model');
  });

  it.each([
    ['openai', true], ['azure', true], ['groq', true], ['deepseek', true], ['vllm', true], ['ollama', true],
    ['mistral', false], ['together', false], ['openrouter', false],
  ] as const)('%s streams with stream_options.include_usage: %s', (family, asks) => {
    const body = wire(family, REQ, true);
    expect(body.stream).toBe(true);
    if (asks) expect(body.stream_options).toEqual({ include_usage: true });
    else expect(body).not.toHaveProperty('stream_options');
    expect(wire(family)).not.toHaveProperty('stream');
    expect(wire(family)).not.toHaveProperty('stream_options');
  });

  it('mistral: seed → random_seed, tool_choice required → any, tool-call ids made 9 letters/digits consistently', () => {
    const req: ChatRequest = {
      messages: [
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_abc123', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_abc123', content: 'ok' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'D681PevKs', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'D681PevKs', content: 'ok' },
      ],
      seed: 42,
      tool_choice: 'required',
    };
    const body = wire('mistral', req);
    expect(body.random_seed).toBe(42);
    expect(body).not.toHaveProperty('seed');
    expect(body.tool_choice).toBe('any');
    const rewritten = body.messages[0].tool_calls![0].id;
    expect(rewritten).toMatch(/^[A-Za-z0-9]{9}$/);
    expect(body.messages[1].tool_call_id).toBe(rewritten);
    expect(body.messages[2].tool_calls![0].id).toBe('D681PevKs');
    expect(body.messages[3].tool_call_id).toBe('D681PevKs');
    expect(wire('openai', req).messages[0].tool_calls![0].id).toBe('call_abc123');
    expect(wire('openai', req).tool_choice).toBe('required');
  });

  it('alnum9 is deterministic and distinguishes ids', () => {
    expect(alnum9('call_1')).toBe(alnum9('call_1'));
    expect(alnum9('call_1')).not.toBe(alnum9('call_2'));
  });

  it('drops what the family declares it cannot take: seed on deepseek, n on groq', () => {
    expect(wire('deepseek', { ...REQ, seed: 1 })).not.toHaveProperty('seed');
    expect(wire('groq', { ...REQ, n: 1 })).not.toHaveProperty('n');
    expect(wire('together', { ...REQ, n: 3 }).n).toBe(3);
  });

  describe('reasoning_effort table', () => {
    const efforts: ReasoningEffort[] = ['none', 'low', 'medium', 'high'];
    const body = (family: OpenAiCompatibleFamily, effort: ReasoningEffort, reasoning: Partial<ReasoningSpec>) =>
      toWireRequest({ ...REQ, reasoning_effort: effort }, target(family, reasoning), VARIANTS[family], { stream: false, modelInBody: true });

    it.each(efforts)('mode none drops %s', (effort) => {
      const b = body('openai', effort, { mode: 'none' });
      expect(b).not.toHaveProperty('reasoning_effort');
      expect(b).not.toHaveProperty('reasoning');
    });

    it.each(['budget', 'level', 'adaptive'] as const)('mode %s is not for this family: dropped', (mode) => {
      for (const effort of efforts) expect(body('openai', effort, { mode })).not.toHaveProperty('reasoning_effort');
    });

    it.each(['low', 'medium', 'high'] as const)('mode effort sends %s as reasoning_effort (OpenRouter: reasoning.effort)', (effort) => {
      expect(body('groq', effort, { mode: 'effort', can_disable: false }).reasoning_effort).toBe(effort);
      const or = body('openrouter', effort, { mode: 'effort' });
      expect(or.reasoning).toEqual({ effort });
      expect(or).not.toHaveProperty('reasoning_effort');
    });

    it('none is sent only when the model can disable reasoning', () => {
      expect(body('openai', 'none', { mode: 'effort', can_disable: true }).reasoning_effort).toBe('none');
      expect(body('openai', 'none', { mode: 'effort', can_disable: false })).not.toHaveProperty('reasoning_effort');
      expect(body('openrouter', 'none', { mode: 'effort', can_disable: true }).reasoning).toEqual({ effort: 'none' });
      expect(body('openrouter', 'none', { mode: 'effort', can_disable: false })).not.toHaveProperty('reasoning');
    });

    it('no effort asked, no field', () => {
      expect(toWireRequest(REQ, target('openai', { mode: 'effort' }), VARIANTS.openai, { stream: false, modelInBody: true })).not.toHaveProperty('reasoning_effort');
    });
  });

  it('embedding requests always ask for float', () => {
    expect(toWireEmbeddingRequest({ input: ['a', 'b'], dimensions: 256, user: 'u' }, target('openai'), { modelInBody: true })).toEqual({
      model: 'up-model', input: ['a', 'b'], encoding_format: 'float', dimensions: 256, user: 'u',
    });
    expect(toWireEmbeddingRequest({ input: ['a'] }, target('azure'), { modelInBody: false })).toEqual({ input: ['a'], encoding_format: 'float' });
  });
});
