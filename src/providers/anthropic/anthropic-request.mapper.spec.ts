import type { ModelSpec } from '../../config/gateway-config';
import type { ChatRequest, UpstreamTarget } from '../provider-adapter';
import { DEFAULT_MAX_TOKENS, toMessagesRequest, toToolChoice } from './anthropic-request.mapper';

function target(model: Partial<ModelSpec> = {}): UpstreamTarget {
  const provider = { id: 'anthropic', family: 'anthropic' as const, headers: {}, timeouts: {} };
  return {
    provider,
    model: { id: 'claude', type: 'chat', targets: [], reasoning: { mode: 'none', can_disable: true, budgets: {} }, ...model },
    upstream: 'claude-sonnet-4-5',
    timeouts: { connectMs: 1000, firstTokenMs: 1000, idleMs: 1000, totalMs: 1000 },
    maxResponseBytes: 1 << 20,
  };
}

const budget = (budgets: ModelSpec['reasoning']['budgets'] = {}, canDisable = true) => target({ reasoning: { mode: 'budget', can_disable: canDisable, budgets } });
const adaptive = (canDisable = true) => target({ reasoning: { mode: 'adaptive', can_disable: canDisable, budgets: {} } });
const user = (content: string): ChatRequest['messages'][number] => ({ role: 'user', content });
const map = (req: Partial<ChatRequest>, t = target(), stream = false) => toMessagesRequest({ messages: [user('Hi')], ...req }, t, stream);

describe('anthropic request mapping', () => {
  it('sends the upstream model, max_tokens and the messages; stream only when streaming', () => {
    expect(map({})).toEqual({ model: 'claude-sonnet-4-5', max_tokens: DEFAULT_MAX_TOKENS, messages: [{ role: 'user', content: 'Hi' }] });
    expect(map({}, target(), true).stream).toBe(true);
  });

  describe('system lifting', () => {
    it('hoists every system and developer message into the top-level system, joined by a blank line', () => {
      const body = map({
        messages: [
          { role: 'system', content: 'Be brief.' },
          user('Hi'),
          { role: 'developer', content: [{ type: 'text', text: 'Use French.' }, { type: 'text', text: 'No emoji.' }] },
          { role: 'assistant', content: 'Salut' },
          { role: 'system', content: '   ' },
        ],
      });
      expect(body.system).toBe('Be brief.\n\nUse French.\nNo emoji.');
      expect(body.messages).toEqual([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Salut' }]);
    });

    it('omits system when there is none', () => {
      expect(map({})).not.toHaveProperty('system');
    });
  });

  describe('role merging', () => {
    it('merges consecutive same-role messages into one turn of blocks', () => {
      const body = map({ messages: [user('one'), user('two'), { role: 'assistant', content: 'a' }, { role: 'assistant', content: [{ type: 'text', text: 'b' }] }, user('three')] });
      expect(body.messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        { role: 'user', content: 'three' },
      ]);
    });

    it('drops empty text blocks and messages left empty', () => {
      const body = map({ messages: [user('Hi'), { role: 'assistant', content: '' }, { role: 'assistant', content: null }, user('again')] });
      expect(body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'text', text: 'again' }] }]);
    });

    it('maps image parts: data URLs to base64 sources, other URLs to url sources', () => {
      const body = map({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is in these?' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg', detail: 'low' } },
            ],
          },
        ],
      });
      expect(body.messages[0].content).toEqual([
        { type: 'text', text: 'What is in these?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ]);
    });
  });

  describe('tools both ways', () => {
    const loop: ChatRequest['messages'] = [
      user('Weather in Paris and Rome?'),
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: '18C' },
      { role: 'tool', tool_call_id: 'toolu_2', content: [{ type: 'text', text: '25C' }] },
    ];

    it('assistant tool_calls become tool_use blocks with parsed input; tool results one user turn of tool_result blocks', () => {
      expect(map({ messages: loop }).messages).toEqual([
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
            { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: '18C' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: '25C' },
          ],
        },
      ]);
    });

    it('puts tool_result blocks before text in a merged user turn', () => {
      const body = map({ messages: [user('q'), { role: 'assistant', content: null, tool_calls: [loop[1].tool_calls![0]] }, user('also this'), { role: 'tool', tool_call_id: 'toolu_1', content: 'ok' }] });
      expect(body.messages[2]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' }, { type: 'text', text: 'also this' }] });
    });

    it('malformed or empty tool arguments become an empty input object', () => {
      const calls = ['{not json', '', '[1,2]'].map((args, i) => ({ id: `t${i}`, type: 'function' as const, function: { name: 'f', arguments: args } }));
      const body = map({ messages: [user('q'), { role: 'assistant', content: null, tool_calls: calls }] });
      expect((body.messages[1].content as { input: unknown }[]).map((b) => b.input)).toEqual([{}, {}, {}]);
    });

    it('tools become name/description/input_schema', () => {
      const body = map({
        tools: [
          { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
          { type: 'function', function: { name: 'now' } },
        ],
      });
      expect(body.tools).toEqual([
        { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
        { name: 'now', input_schema: { type: 'object', properties: {} } },
      ]);
    });

    it.each([
      ['auto', undefined, { type: 'auto' }],
      ['required', undefined, { type: 'any' }],
      ['none', undefined, { type: 'none' }],
      [{ type: 'function', function: { name: 'get_weather' } }, undefined, { type: 'tool', name: 'get_weather' }],
      ['required', false, { type: 'any', disable_parallel_tool_use: true }],
      [undefined, false, { type: 'auto', disable_parallel_tool_use: true }],
      [undefined, undefined, undefined],
    ] as const)('tool_choice %j with parallel_tool_calls %j → %j', (choice, parallel, wire) => {
      expect(toToolChoice(choice as never, parallel)).toEqual(wire);
    });

    it('tool_choice is not sent without tools', () => {
      expect(map({ tool_choice: 'required' })).not.toHaveProperty('tool_choice');
    });
  });

  describe('sampling and other fields', () => {
    it('clamps temperature onto 0..1 and passes top_p, stop sequences and the user id', () => {
      expect(map({ temperature: 1.6, top_p: 0.9, stop: ['END', ' ', '\n\nHuman:'], user: 'u-42' })).toMatchObject({
        temperature: 1,
        top_p: 0.9,
        stop_sequences: ['END', '\n\nHuman:'],
        metadata: { user_id: 'u-42' },
      });
      expect(map({ temperature: 0.3 }).temperature).toBe(0.3);
      expect(map({ temperature: 0 }).temperature).toBe(0);
    });

    it('sends nothing for fields Anthropic has no equivalent for', () => {
      const body = map({ seed: 7, n: 1, frequency_penalty: 1, presence_penalty: 1, response_format: { type: 'json_object' }, stop: ['  '] });
      expect(Object.keys(body).sort()).toEqual(['max_tokens', 'messages', 'model']);
    });
  });

  describe('max_tokens is always sent', () => {
    it.each([
      ['the request', { max_completion_tokens: 300 }, { max_output_tokens: 8192 }, 300],
      ["the model's max_output_tokens", {}, { max_output_tokens: 8192 }, 8192],
      ['the 4096 default', {}, {}, 4096],
    ])('from %s', (_label, req, model, expected) => {
      expect(map(req, target(model)).max_tokens).toBe(expected);
    });
  });

  describe('reasoning_effort', () => {
    it.each([
      ['low', 1024],
      ['medium', 4096],
      ['high', 16384],
    ] as const)('budget mode, %s → thinking enabled with the default budget %i', (effort, tokens) => {
      const body = map({ reasoning_effort: effort, max_completion_tokens: 40_000 }, budget());
      expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: tokens });
      expect(body.max_tokens).toBe(40_000);
      expect(body).not.toHaveProperty('output_config');
    });

    it('budget mode uses the configured budgets, never below 1024', () => {
      expect(map({ reasoning_effort: 'high', max_completion_tokens: 40_000 }, budget({ high: 32_000 })).thinking).toEqual({ type: 'enabled', budget_tokens: 32_000 });
      expect(map({ reasoning_effort: 'low', max_completion_tokens: 40_000 }, budget({ low: 200 })).thinking).toEqual({ type: 'enabled', budget_tokens: 1024 });
    });

    it('raises max_tokens to budget + the output allowance when it would not exceed the budget', () => {
      expect(map({ reasoning_effort: 'medium', max_completion_tokens: 100 }, budget()).max_tokens).toBe(4096 + 100);
      expect(map({ reasoning_effort: 'medium' }, budget()).max_tokens).toBe(4096 + DEFAULT_MAX_TOKENS);
      expect(map({ reasoning_effort: 'high' }, budget({}, true)).max_tokens).toBe(16384 + 4096);
      expect(map({ reasoning_effort: 'low', max_completion_tokens: 1025 }, budget()).max_tokens).toBe(1025);
      const b = map({ reasoning_effort: 'low', max_completion_tokens: 1024 }, budget());
      expect(b.max_tokens).toBeGreaterThan((b.thinking as { budget_tokens: number }).budget_tokens);
    });

    it('drops temperature and top_p while thinking (Anthropic requires temperature 1)', () => {
      const body = map({ reasoning_effort: 'low', temperature: 0.2, top_p: 0.5 }, budget());
      expect(body).not.toHaveProperty('temperature');
      expect(body).not.toHaveProperty('top_p');
    });

    it.each(['low', 'medium', 'high'] as const)('adaptive mode, %s → adaptive thinking + output_config.effort, max_tokens unchanged', (effort) => {
      const body = map({ reasoning_effort: effort, max_completion_tokens: 500, temperature: 0.5 }, adaptive());
      expect(body).toMatchObject({ thinking: { type: 'adaptive', display: 'summarized' }, output_config: { effort }, max_tokens: 500 });
      expect(body).not.toHaveProperty('temperature');
    });

    it.each([
      ['budget', budget()],
      ['adaptive', adaptive()],
    ])('effort none turns thinking off in %s mode (no thinking field, sampling kept)', (_mode, t) => {
      const body = map({ reasoning_effort: 'none', temperature: 0.4 }, t);
      expect(body).not.toHaveProperty('thinking');
      expect(body).not.toHaveProperty('output_config');
      expect(body.temperature).toBe(0.4);
    });

    it('effort none on a model that cannot disable reasoning gets its lowest setting', () => {
      expect(map({ reasoning_effort: 'none' }, budget({}, false)).thinking).toEqual({ type: 'enabled', budget_tokens: 1024 });
      expect(map({ reasoning_effort: 'none' }, adaptive(false)).output_config).toEqual({ effort: 'low' });
    });

    it.each(['none', 'effort', 'level'] as const)('mode %s drops the field', (mode) => {
      const body = map({ reasoning_effort: 'high', temperature: 0.4 }, target({ reasoning: { mode, can_disable: true, budgets: {} } }));
      expect(body).not.toHaveProperty('thinking');
      expect(body).not.toHaveProperty('output_config');
      expect(body.temperature).toBe(0.4);
    });

    it('no reasoning_effort → no thinking, even on a thinking model', () => {
      expect(map({}, budget())).not.toHaveProperty('thinking');
    });

    it('forced tool use turns thinking off (Anthropic refuses the combination)', () => {
      const tools = [{ type: 'function' as const, function: { name: 'f' } }];
      expect(map({ reasoning_effort: 'high', tools, tool_choice: 'required' }, budget())).not.toHaveProperty('thinking');
      expect(map({ reasoning_effort: 'high', tools, tool_choice: { type: 'function', function: { name: 'f' } } }, budget())).not.toHaveProperty('thinking');
      expect(map({ reasoning_effort: 'high', tools, tool_choice: 'auto' }, budget()).thinking).toEqual({ type: 'enabled', budget_tokens: 16384 });
    });

    it('a tool-loop continuation turns thinking off (signed thinking blocks cannot round-trip)', () => {
      const messages: ChatRequest['messages'] = [
        user('q'),
        { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 't1', content: 'r' },
      ];
      expect(map({ reasoning_effort: 'low', messages }, budget())).not.toHaveProperty('thinking');
      expect(map({ reasoning_effort: 'low', messages: [...messages, { role: 'assistant', content: 'done' }, user('next')] }, budget()).thinking).toBeDefined();
    });
  });
});

describe('anthropic structured output request', () => {
  const ADDRESS = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
  const schema = { type: 'object', properties: { home: { $ref: '#/$defs/Address' } }, required: ['home'], $defs: { Address: ADDRESS } };
  const rf = (extra: Record<string, unknown> = {}): ChatRequest['response_format'] => ({ type: 'json_schema', json_schema: { name: 'person', schema, strict: true, ...extra } });
  const mode = (structuredOutput: 'native' | 'forced_tool', model: Partial<ModelSpec> = {}) => ({ ...target(model), structuredOutput });
  const tool = { type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: {} } } };

  it('native: output_config.format carries the schema as it is ($defs and all); no tools, thinking kept', () => {
    const body = map({ response_format: rf(), reasoning_effort: 'high' }, { ...budget(), structuredOutput: 'native' });
    expect(body.output_config).toEqual({ format: { type: 'json_schema', schema } });
    expect(body.tools).toBeUndefined();
    expect(body.thinking).toEqual({ type: 'enabled', budget_tokens: 16384 });
  });

  it('native with adaptive thinking: effort and format side by side in output_config', () => {
    const body = map({ response_format: rf(), reasoning_effort: 'low' }, { ...adaptive(), structuredOutput: 'native' });
    expect(body.output_config).toEqual({ effort: 'low', format: { type: 'json_schema', schema } });
  });

  it('forced tool (the default): a tool named after the schema with it as input_schema, forced by name', () => {
    for (const t of [target(), mode('forced_tool')]) {
      const body = map({ response_format: rf({ description: 'A person' }) }, t);
      expect(body.tools).toEqual([{ name: 'person', description: 'A person', input_schema: schema }]);
      expect(body.tool_choice).toEqual({ type: 'tool', name: 'person' });
      expect(body.output_config).toBeUndefined();
    }
  });

  it('forced tool wins over thinking: reasoning_effort sends no thinking, and temperature is kept', () => {
    const body = map({ response_format: rf(), reasoning_effort: 'high', temperature: 0.2 }, { ...budget(), structuredOutput: 'forced_tool' });
    expect(body).not.toHaveProperty('thinking');
    expect(body.temperature).toBe(0.2);
  });

  it('forced tool beside client tools: any tool must be called; a client-named tool stays forced; a clashing name is suffixed', () => {
    expect(map({ response_format: rf(), tools: [tool] }).tool_choice).toEqual({ type: 'any' });
    expect(map({ response_format: rf(), tools: [tool], tool_choice: 'auto', parallel_tool_calls: false }).tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    expect(map({ response_format: rf(), tools: [tool], tool_choice: 'none' }).tool_choice).toEqual({ type: 'tool', name: 'person' });
    expect(map({ response_format: rf(), tools: [tool], tool_choice: { type: 'function', function: { name: 'lookup' } } }).tool_choice).toEqual({ type: 'tool', name: 'lookup' });
    const clash = map({ response_format: rf(), tools: [{ type: 'function', function: { name: 'person' } }] });
    expect(clash.tools!.map((t) => t.name)).toEqual(['person', 'person_response']);
  });

  it('json_object and text send nothing structured', () => {
    expect(map({ response_format: { type: 'json_object' } })).not.toHaveProperty('tools');
    expect(map({ response_format: { type: 'text' } })).not.toHaveProperty('output_config');
  });
});

describe('anthropic forced tool with a schema that is not an object', () => {
  it('wraps it as the required property value, root $defs kept at the root', () => {
    const schema = { type: 'array', items: { $ref: '#/$defs/Item' }, $defs: { Item: { type: 'string' } } };
    const body = map({ response_format: { type: 'json_schema', json_schema: { name: 'list', schema } } });
    expect(body.tools).toEqual([
      {
        name: 'list',
        description: 'Answer with the list object. Its input is the whole answer.',
        input_schema: { type: 'object', properties: { value: { type: 'array', items: { $ref: '#/$defs/Item' } } }, required: ['value'], $defs: { Item: { type: 'string' } } },
      },
    ]);
  });
});
