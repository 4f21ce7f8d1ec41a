import type { ReasoningSpec } from '../../config/gateway-config';
import type { ChatRequest, ReasoningEffort } from '../provider-adapter';
import {
  embedBatches, MAX_EMBED_BATCH, SKIP_THOUGHT_SIGNATURE, thinkingConfigFor, toBatchEmbedContentsRequest, toContents, toEmbedContentRequest, toFunctionDeclarations, toGenerateContentRequest,
  toToolConfig,
} from './gemini-request.mapper';
import { makeToolCallId } from './gemini-tool-call-id';

const NO_REASONING: ReasoningSpec = { mode: 'none', can_disable: true, budgets: {} };
const reasoning = (mode: ReasoningSpec['mode'], canDisable = true, budgets: ReasoningSpec['budgets'] = {}): ReasoningSpec => ({ mode, can_disable: canDisable, budgets });

describe('gemini request mapping', () => {
  it('lifts system and developer messages into systemInstruction, in order, and maps roles to user/model', () => {
    const body = toGenerateContentRequest(
      {
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'Hi' },
          { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
          { role: 'assistant', content: 'Bonjour' },
          { role: 'user', content: 'Ça va?' },
        ],
      },
      NO_REASONING,
    );
    expect(body).toEqual({
      systemInstruction: { parts: [{ text: 'You are terse.' }, { text: 'Answer in French.' }] },
      contents: [
        { role: 'user', parts: [{ text: 'Hi' }] },
        { role: 'model', parts: [{ text: 'Bonjour' }] },
        { role: 'user', parts: [{ text: 'Ça va?' }] },
      ],
    });
  });

  it('sends no systemInstruction and no generationConfig when there is nothing for them', () => {
    expect(toGenerateContentRequest({ messages: [{ role: 'user', content: 'Hi' }] }, NO_REASONING)).toEqual({ contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] });
  });

  it('merges consecutive turns of one role (tool results join the user turn that follows)', () => {
    const { contents } = toContents(
      [
        { role: 'user', content: 'one' },
        { role: 'user', content: 'two' },
        { role: 'assistant', content: 'a' },
        { role: 'assistant', content: 'b' },
      ],
      { dummySignatures: false },
    );
    expect(contents).toEqual([
      { role: 'user', parts: [{ text: 'one' }, { text: 'two' }] },
      { role: 'model', parts: [{ text: 'a' }, { text: 'b' }] },
    ]);
  });

  it('maps image parts: data URLs to inlineData, other URLs to fileData', () => {
    const { contents } = toContents(
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.webp?x=1', detail: 'low' } },
          ],
        },
      ],
      { dummySignatures: false },
    );
    expect(contents[0].parts).toEqual([
      { text: 'What is this?' },
      { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } },
      { fileData: { mimeType: 'image/webp', fileUri: 'https://example.com/cat.webp?x=1' } },
    ]);
  });

  describe('tool calls and results', () => {
    const signed = makeToolCallId('CiQB++++ZmFrZf/+c2lnbg==');
    const plain = 'call_from_somewhere_else';
    const req: ChatRequest = {
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: 'Let me look.',
          tool_calls: [
            { id: signed, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            { id: plain, type: 'function', function: { name: 'get_time', arguments: '' } },
          ],
        },
        { role: 'tool', tool_call_id: plain, content: 'noon' },
        { role: 'tool', tool_call_id: signed, content: '{"temp_c":21}' },
        { role: 'user', content: 'Thanks' },
      ],
    };

    it('become functionCall parts (signature from the id) and functionResponse parts named after the call, in one user turn', () => {
      expect(toContents(req.messages, { dummySignatures: false }).contents).toEqual([
        { role: 'user', parts: [{ text: 'Weather in Paris and Rome?' }] },
        {
          role: 'model',
          parts: [
            { text: 'Let me look.' },
            { functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'CiQB++++ZmFrZf/+c2lnbg==' },
            { functionCall: { name: 'get_time', args: {} } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'get_time', response: { content: 'noon' } } },
            { functionResponse: { name: 'get_weather', response: { temp_c: 21 } } },
            { text: 'Thanks' },
          ],
        },
      ]);
    });

    it('puts the documented bypass signature on an unsigned first call only for Gemini 3 (level) models', () => {
      const unsigned = {
        role: 'assistant' as const,
        content: null,
        tool_calls: [
          { id: 'a', type: 'function' as const, function: { name: 'f', arguments: '{}' } },
          { id: 'b', type: 'function' as const, function: { name: 'g', arguments: '{}' } },
        ],
      };
      const level = toGenerateContentRequest({ messages: [{ role: 'user', content: 'x' }, unsigned] }, reasoning('level', false));
      expect(level.contents[1].parts).toEqual([
        { functionCall: { name: 'f', args: {} }, thoughtSignature: SKIP_THOUGHT_SIGNATURE },
        { functionCall: { name: 'g', args: {} } },
      ]);
      const budget = toGenerateContentRequest({ messages: [{ role: 'user', content: 'x' }, unsigned] }, reasoning('budget'));
      expect(budget.contents[1].parts![0]).toEqual({ functionCall: { name: 'f', args: {} } });
    });

    it('keeps broken argument JSON and non-object results as objects, and names an unmatched result from the message', () => {
      const { contents } = toContents(
        [
          { role: 'assistant', content: null, tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{not json' } }] },
          { role: 'tool', tool_call_id: 'x', content: '[1,2]' },
          { role: 'tool', tool_call_id: 'unknown', name: 'g', content: '42' },
        ],
        { dummySignatures: false },
      );
      expect(contents).toEqual([
        { role: 'model', parts: [{ functionCall: { name: 'f', args: { raw: '{not json' } } }] },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'f', response: { content: '[1,2]' } } },
            { functionResponse: { name: 'g', response: { content: '42' } } },
          ],
        },
      ]);
    });
  });

  it('maps tools to functionDeclarations, stripping schema keywords Gemini refuses', () => {
    expect(
      toFunctionDeclarations([
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'Weather for a city',
            strict: true,
            parameters: {
              $schema: 'http://json-schema.org/draft-07/schema#',
              type: 'object',
              additionalProperties: false,
              properties: { city: { type: 'string', description: 'City' }, days: { type: ['integer', 'null'], minimum: 1 }, tags: { type: 'array', items: { type: 'string', additionalProperties: false } } },
              required: ['city'],
            },
          },
        },
        { type: 'function', function: { name: 'now', parameters: { type: 'object', properties: {} } } },
      ]),
    ).toEqual([
      {
        name: 'get_weather',
        description: 'Weather for a city',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string', description: 'City' }, days: { type: 'integer', nullable: true, minimum: 1 }, tags: { type: 'array', items: { type: 'string' } } },
          propertyOrdering: ['city', 'days', 'tags'],
          required: ['city'],
        },
      },
      { name: 'now' },
    ]);
  });

  it('inlines $defs references of tool parameters (Gemini has no $ref), and keeps a recursive schema to its plain keywords', () => {
    const [d] = toFunctionDeclarations([
      {
        type: 'function',
        function: {
          name: 'book',
          parameters: {
            type: 'object',
            $defs: { place: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
            properties: { from: { $ref: '#/$defs/place' }, to: { $ref: '#/$defs/place' } },
            required: ['from', 'to'],
          },
        },
      },
    ]);
    const place = { type: 'object', properties: { city: { type: 'string' } }, propertyOrdering: ['city'], required: ['city'] };
    expect(d.parameters).toEqual({ type: 'object', properties: { from: place, to: place }, propertyOrdering: ['from', 'to'], required: ['from', 'to'] });
    expect(JSON.stringify(d.parameters)).not.toMatch(/\$ref|\$defs/);

    const [r] = toFunctionDeclarations([
      {
        type: 'function',
        function: { name: 'tree', parameters: { type: 'object', $defs: { node: { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#/$defs/node' } } } } }, properties: { root: { $ref: '#/$defs/node' } } } },
      },
    ]);
    expect(JSON.stringify(r.parameters)).not.toMatch(/\$ref|\$defs/);
  });

  it.each([
    ['auto', { mode: 'AUTO' }],
    ['none', { mode: 'NONE' }],
    ['required', { mode: 'ANY' }],
    [{ type: 'function' as const, function: { name: 'get_weather' } }, { mode: 'ANY', allowedFunctionNames: ['get_weather'] }],
  ])('tool_choice %j → functionCallingConfig %j', (choice, config) => {
    expect(toToolConfig(choice as never)).toEqual({ functionCallingConfig: config });
  });

  it('puts tools and toolConfig at the top level and every sampling field in generationConfig', () => {
    const body = toGenerateContentRequest(
      {
        messages: [{ role: 'user', content: 'Hi' }],
        temperature: 0.7,
        top_p: 0.9,
        max_completion_tokens: 256,
        stop: ['END', 'STOP'],
        n: 2,
        seed: 42,
        presence_penalty: 0.5,
        frequency_penalty: -0.5,
        response_format: { type: 'json_object' },
        user: 'someone',
        parallel_tool_calls: false,
        tools: [{ type: 'function', function: { name: 'f' } }],
        tool_choice: 'required',
      },
      NO_REASONING,
    );
    expect(body).toEqual({
      contents: [{ role: 'user', parts: [{ text: 'Hi' }] }],
      tools: [{ functionDeclarations: [{ name: 'f' }] }],
      toolConfig: { functionCallingConfig: { mode: 'ANY' } },
      generationConfig: {
        temperature: 0.7, topP: 0.9, maxOutputTokens: 256, stopSequences: ['END', 'STOP'], candidateCount: 2, seed: 42,
        presencePenalty: 0.5, frequencyPenalty: -0.5, responseMimeType: 'application/json',
      },
    });
  });

  it('sends no responseMimeType for a text response_format', () => {
    expect(toGenerateContentRequest({ messages: [{ role: 'user', content: 'Hi' }], response_format: { type: 'text' } }, NO_REASONING).generationConfig).toBeUndefined();
  });

  describe('reasoning_effort → thinkingConfig', () => {
    it.each<[string, ReasoningSpec, ReasoningEffort, object | undefined]>([
      ['budget defaults, low', reasoning('budget'), 'low', { thinkingBudget: 1024, includeThoughts: true }],
      ['budget defaults, medium', reasoning('budget'), 'medium', { thinkingBudget: 8192, includeThoughts: true }],
      ['budget defaults, high', reasoning('budget'), 'high', { thinkingBudget: 24576, includeThoughts: true }],
      ['configured budget', reasoning('budget', true, { high: 32768 }), 'high', { thinkingBudget: 32768, includeThoughts: true }],
      ['budget, none, can disable', reasoning('budget', true), 'none', { thinkingBudget: 0 }],
      ['budget, none, cannot disable (2.5 Pro)', reasoning('budget', false), 'none', undefined],
      ['level, low', reasoning('level', false), 'low', { thinkingLevel: 'low', includeThoughts: true }],
      ['level, medium', reasoning('level', false), 'medium', { thinkingLevel: 'medium', includeThoughts: true }],
      ['level, high', reasoning('level', false), 'high', { thinkingLevel: 'high', includeThoughts: true }],
      ['level, none, cannot disable (Gemini 3)', reasoning('level', false), 'none', { thinkingLevel: 'low' }],
      ['level, none, config says it can', reasoning('level', true), 'none', { thinkingLevel: 'minimal' }],
      ['mode none', reasoning('none'), 'high', undefined],
      ['mode effort', reasoning('effort'), 'high', undefined],
      ['mode adaptive', reasoning('adaptive'), 'low', undefined],
    ])('%s', (_label, spec, effort, expected) => {
      expect(thinkingConfigFor(effort, spec)).toEqual(expected);
      const body = toGenerateContentRequest({ messages: [{ role: 'user', content: 'x' }], reasoning_effort: effort }, spec);
      expect(body.generationConfig?.thinkingConfig).toEqual(expected);
    });

    it('sends no thinkingConfig when the client sent no reasoning_effort', () => {
      expect(thinkingConfigFor(undefined, reasoning('budget'))).toBeUndefined();
      expect(thinkingConfigFor(undefined, reasoning('level', false))).toBeUndefined();
    });

    it('never sends both a budget and a level', () => {
      for (const mode of ['budget', 'level'] as const) {
        for (const effort of ['none', 'low', 'medium', 'high'] as const) {
          const c = thinkingConfigFor(effort, reasoning(mode)) ?? {};
          expect('thinkingBudget' in c && 'thinkingLevel' in c).toBe(false);
        }
      }
    });
  });

  describe('embeddings', () => {
    it('embedContent carries the text and outputDimensionality', () => {
      expect(toEmbedContentRequest('hello', 768)).toEqual({ content: { parts: [{ text: 'hello' }] }, outputDimensionality: 768 });
      expect(toEmbedContentRequest('hello', undefined)).toEqual({ content: { parts: [{ text: 'hello' }] } });
    });

    it('batchEmbedContents repeats models/<upstream> per request, in input order', () => {
      expect(toBatchEmbedContentsRequest({ input: ['a', 'b', 'c'] }, 'gemini-embedding-001', 256)).toEqual({
        requests: ['a', 'b', 'c'].map((text) => ({ model: 'models/gemini-embedding-001', content: { parts: [{ text }] }, outputDimensionality: 256 })),
      });
      expect(toBatchEmbedContentsRequest({ input: ['a'] }, 'models/x', undefined).requests[0].model).toBe('models/x');
    });

    it('splits inputs into consecutive batches of at most 100, in order', () => {
      const input = Array.from({ length: 250 }, (_, i) => `t${i}`);
      const batches = embedBatches(input);
      expect(MAX_EMBED_BATCH).toBe(100);
      expect(batches.map((b) => b.length)).toEqual([100, 100, 50]);
      expect(batches.flat()).toEqual(input);
      expect(embedBatches(input.slice(0, 100)).map((b) => b.length)).toEqual([100]);
      expect(embedBatches(input.slice(0, 101)).map((b) => b.length)).toEqual([100, 1]);
      expect(embedBatches([])).toEqual([]);
    });
  });
});

describe('gemini structured output request', () => {
  const schema = {
    type: 'object',
    properties: { home: { $ref: '#/$defs/Address' }, kind: { const: 'person' } },
    required: ['home', 'kind'],
    additionalProperties: false,
    $defs: { Address: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } },
  };
  const req: ChatRequest = { messages: [{ role: 'user', content: 'Hi' }], response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } };

  it('converted_schema (the default): JSON mime type and an inlined responseSchema Gemini takes', () => {
    for (const body of [toGenerateContentRequest(req, NO_REASONING), toGenerateContentRequest(req, NO_REASONING, 'converted_schema')]) {
      expect(body.generationConfig).toEqual({
        responseMimeType: 'application/json',
        responseSchema: {
          type: 'object',
          properties: { home: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], propertyOrdering: ['city'] }, kind: { type: 'string', enum: ['person'] } },
          required: ['home', 'kind'],
          propertyOrdering: ['home', 'kind'],
        },
      });
    }
  });

  it('native: responseJsonSchema carries the schema as it is, $defs included', () => {
    expect(toGenerateContentRequest(req, NO_REASONING, 'native').generationConfig).toEqual({ responseMimeType: 'application/json', responseJsonSchema: schema });
  });

  it('json_object keeps sending only the mime type', () => {
    expect(toGenerateContentRequest({ ...req, response_format: { type: 'json_object' } }, NO_REASONING, 'native').generationConfig).toEqual({ responseMimeType: 'application/json' });
  });
});
