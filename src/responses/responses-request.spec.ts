import { GatewayError } from '../common/errors/gateway-error';
import { parseResponsesBody, responsesParam } from './responses-request';

const refused = (body: unknown): GatewayError => {
  try {
    parseResponsesBody(body);
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error('not refused');
};

describe('parseResponsesBody', () => {
  it('maps a string input and instructions onto a system and a user message', () => {
    const { chat, echo } = parseResponsesBody({ model: 'auto', input: 'Hi', instructions: 'Be brief.', max_output_tokens: 40, temperature: 0.5, top_p: 0.9 });
    expect(chat).toEqual({
      model: 'auto',
      stream: false,
      includeUsage: false,
      request: {
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
        max_completion_tokens: 40,
        temperature: 0.5,
        top_p: 0.9,
      },
    });
    expect(echo).toMatchObject({ instructions: 'Be brief.', max_output_tokens: 40, temperature: 0.5, top_p: 0.9, tool_choice: 'auto', parallel_tool_calls: true, tools: [], metadata: {} });
  });

  it('maps message items, images, and a function call with its output onto chat messages', () => {
    const { chat } = parseResponsesBody({
      model: 'auto',
      input: [
        { role: 'developer', content: 'Use tools.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather ' }, { type: 'input_image', image_url: 'https://x/y.png', detail: 'low' }] },
        { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Let me look.', annotations: [] }] },
        { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}', id: 'fc_1', status: 'completed' },
        { type: 'function_call', call_id: 'call_2', name: 'weather', arguments: '{"city":"Rome"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'cold' },
        { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'warm' }] },
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' },
      ],
    });
    expect(chat.request.messages).toEqual([
      { role: 'developer', content: 'Use tools.' },
      { role: 'user', content: [{ type: 'text', text: 'Weather ' }, { type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } }] },
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
          { id: 'call_2', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'cold' },
      { role: 'tool', tool_call_id: 'call_2', content: 'warm' },
    ]);
  });

  it('a function call with no assistant message before it opens one with null content', () => {
    const { chat } = parseResponsesBody({ model: 'm', input: [{ role: 'user', content: 'x' }, { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }] });
    expect(chat.request.messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] });
  });

  it('maps flat function tools, tool_choice, text.format json_schema and reasoning.effort to the chat request', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
    const { chat, echo } = parseResponsesBody({
      model: 'm',
      input: 'x',
      tools: [{ type: 'function', name: 'f', description: 'does f', parameters: { type: 'object' }, strict: true }],
      tool_choice: { type: 'function', name: 'f' },
      parallel_tool_calls: false,
      text: { format: { type: 'json_schema', name: 'out', schema, strict: true } },
      reasoning: { effort: 'minimal', summary: 'auto' },
      metadata: { team: 'a' },
      user: 'u1',
      stream: true,
      store: false,
      service_tier: 'auto',
      prompt_cache_key: 'k',
      safety_identifier: 's',
      truncation: 'disabled',
      include: ['reasoning.encrypted_content'],
      background: false,
      stream_options: { include_obfuscation: false },
    });
    expect(chat.stream).toBe(true);
    expect(chat.request).toMatchObject({
      tools: [{ type: 'function', function: { name: 'f', description: 'does f', parameters: { type: 'object' }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      parallel_tool_calls: false,
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema, strict: true } },
      reasoning_effort: 'low',
      user: 'u1',
    });
    expect(echo).toMatchObject({
      tools: [{ type: 'function', name: 'f', description: 'does f', parameters: { type: 'object' }, strict: true }],
      tool_choice: { type: 'function', name: 'f' },
      parallel_tool_calls: false,
      text: { format: { type: 'json_schema', name: 'out', schema, strict: true } },
      reasoning: { effort: 'minimal', summary: 'auto' },
      metadata: { team: 'a' },
      user: 'u1',
    });
    expect(parseResponsesBody({ model: 'm', input: 'x', text: { format: { type: 'json_object' } } }).chat.request.response_format).toEqual({ type: 'json_object' });
    expect(parseResponsesBody({ model: 'm', input: 'x', reasoning: { effort: 'xhigh' } }).chat.request.reasoning_effort).toBe('high');
  });

  it.each([
    [{ previous_response_id: 'resp_1' }, 'previous_response_id', /stateless/],
    [{ conversation: 'conv_1' }, 'conversation', /stateless/],
    [{ background: true }, 'background', /stateless/],
    [{ prompt: { id: 'pmpt_1' } }, 'prompt', /stored on OpenAI/],
    [{ tools: [{ type: 'web_search' }] }, 'tools.0.type', /hosted tools/],
    [{ tools: [{ type: 'function', name: 'f' }, { type: 'file_search', vector_store_ids: [] }] }, 'tools.1.type', /hosted tools/],
    [{ tools: [{ type: 'mcp', server_label: 'x' }] }, 'tools.0.type', /hosted tools/],
    [{ tools: [{ type: 'function', name: 'f', function: {} }] }, 'tools.0.function', /not a supported field/],
    [{ tool_choice: { type: 'web_search_preview' }, tools: [{ type: 'function', name: 'f' }] }, 'tool_choice', /function tools/],
    [{ truncation: 'auto' }, 'truncation', /never drops/],
    [{ include: ['message.output_text.logprobs'] }, 'include.0', /logprobs/],
    [{ include: ['nope'] }, 'include.0', /not a supported value/],
    [{ top_logprobs: 2 }, 'top_logprobs', /not a supported field/],
    [{ messages: [] }, 'messages', /not a supported field/],
    [{ __proto__x: 1, constructor: 1 }, '__proto__x', /not a supported field/],
    [{ input: [] }, 'input', /non-empty/],
    [{ input: 5 }, 'input', /string or an array/],
    [{ input: [{ type: 'item_reference', id: 'x' }] }, 'input.0.type', /stateless/],
    [{ input: [{ type: 'web_search_call', id: 'x' }] }, 'input.0.type', /not supported/],
    [{ input: [{ role: 'tool', content: 'x' }] }, 'input.0.role', /must be one of/],
    [{ input: [{ role: 'system', content: [{ type: 'input_image', image_url: 'u' }] }] }, 'input.0.content.0.type', /not supported in a system message/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, 'input.0.content.0.file_id', /file storage/],
    [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }, 'input.0.content.0.type', /file/],
    [{ input: [{ type: 'function_call', call_id: '', name: 'f', arguments: '{}' }] }, 'input.0.call_id', /not be empty/],
    [{ text: { format: { type: 'json_schema', name: 'bad name!', schema: {} } } }, 'text.format.name', /letters, digits/],
    [{ text: { format: { type: 'json_schema', name: 'n', schema: { $ref: '#/$defs/missing' } } } }, 'text.format.schema', /does not resolve/],
    [{ text: { format: { type: 'grammar' } } }, 'text.format.type', /text, json_object or json_schema/],
    [{ reasoning: { effort: 'max' } }, 'reasoning.effort', /must be one of/],
    [{ temperature: 3 }, 'temperature', /between 0 and 2/],
    [{ max_output_tokens: 0 }, 'max_output_tokens', /between 1/],
    [{ metadata: { a: 1 } }, 'metadata.a', /must be a string/],
    [{ tool_choice: 'required' }, 'tool_choice', /needs tools/],
    [{ stream_options: { include_obfuscation: true } }, 'stream_options', /only allowed when stream/],
  ])('refuses %j naming %s', (extra, param, message) => {
    const err = refused({ model: 'm', input: 'x', ...(extra as object) });
    expect(err.code).toBe('invalid_request');
    expect(err.param).toBe(param);
    expect(err.message).toMatch(message);
  });

  it('needs a model and an object body', () => {
    expect(refused({ input: 'x' }).param).toBe('model');
    expect(refused([1]).param).toBe('body');
  });

  it('names refused chat fields as the Responses API does', () => {
    expect(responsesParam('messages')).toBe('input');
    expect(responsesParam('response_format')).toBe('text.format');
    expect(responsesParam('tools')).toBe('tools');
    expect(responsesParam('constructor')).toBe('constructor');
  });
});
