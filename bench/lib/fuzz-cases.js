'use strict';
/**
 * What `npm run fuzz` sends: fast-check arbitraries of each endpoint's request (every field a
 * plausible value or junk, random headers and query strings), and the raw-socket cases that no
 * HTTP client would send (truncated bodies, slow-loris headers, pipelining, invalid UTF-8,
 * duplicate and conflicting headers, oversized headers, broken chunked encoding).
 */
const fc = require('fast-check');

const PROTO = [...Object.getOwnPropertyNames(Object.prototype), '__proto__', 'prototype'];

function arbitraries({ key, chatModels, embeddingModels, pairs }) {
  const oddString = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.constantFrom('', ' ', '\u0000', '\ud800', '\udfff', '😀', '\u202e', 'a'.repeat(300), 'null', '{}', '%00', '../..', '\r\n', ...PROTO),
    fc.nat({ max: 70_000 }).map((n) => 'x'.repeat(n)),
  );
  const junk = fc.oneof(
    { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    { weight: 2, arbitrary: oddString },
    { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1e308, 0.5, 2 ** 53, [], {}, [[[]]]) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }).map((d) => JSON.parse('['.repeat(d) + ']'.repeat(d))) },
  );
  // Junk in about one field of ten: most bodies are then wrong in one place, and a fair share are valid.
  const mostly = (valid) => fc.oneof({ weight: 10, arbitrary: valid }, { weight: 1, arbitrary: junk });
  const extraKeys = fc.dictionary(fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom(...PROTO)), junk, { maxKeys: 2 });
  const withExtra = (a) => fc.tuple(a, fc.oneof({ weight: 9, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: extraKeys })).map(([v, x]) => ({ ...v, ...x }));
  /** A quarter of the bodies are valid ones (so the success paths are fuzzed too), the rest fuzzed field by field. */
  const validOr = (valid, fuzzed) => fc.oneof({ weight: 1, arbitrary: valid }, { weight: 3, arbitrary: fuzzed });
  const text = fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('api_key: 1', '1234-5678', '{{customer}}', '{{ missing }}'));
  const opt = (shape, requiredKeys = []) => fc.record(shape, { requiredKeys });

  const message = withExtra(
    fc.record(
      {
        role: mostly(fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool')),
        content: fc.oneof(mostly(text), fc.array(fc.oneof(fc.record({ type: fc.constant('text'), text: mostly(text) }), fc.record({ type: fc.constant('image_url'), image_url: mostly(opt({ url: mostly(fc.webUrl()), detail: fc.string() })) }), junk), { maxLength: 3 })),
        name: mostly(fc.string({ maxLength: 10 })),
        tool_call_id: mostly(fc.string({ maxLength: 10 })),
        tool_calls: mostly(fc.array(opt({ id: mostly(fc.string()), type: mostly(fc.constant('function')), function: mostly(opt({ name: mostly(fc.string()), arguments: mostly(fc.string()) })) }), { maxLength: 2 })),
      },
      { requiredKeys: ['role', 'content'] },
    ),
  );
  const chatFields = {
    model: mostly(fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...chatModels, 'nope', 'a,b', ...PROTO) }, { weight: 1, arbitrary: oddString })),
    messages: mostly(fc.array(message, { minLength: 1, maxLength: 4 })),
    temperature: mostly(fc.double({ min: -1, max: 3, noNaN: true })),
    top_p: mostly(fc.double({ min: -0.5, max: 1.5, noNaN: true })),
    max_tokens: mostly(fc.integer({ min: -5, max: 100_000 })),
    max_completion_tokens: mostly(fc.integer({ min: -5, max: 100_000 })),
    stop: mostly(fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 5 }), { maxLength: 6 }))),
    reasoning_effort: mostly(fc.constantFrom('none', 'low', 'medium', 'high', 'max')),
    response_format: mostly(opt({ type: fc.constantFrom('json_object', 'text', 'json_schema') })),
    stream_options: mostly(opt({ include_usage: mostly(fc.boolean()) })),
    inputs: mostly(fc.dictionary(fc.constantFrom('customer', 'x', 'toString'), fc.oneof(fc.string(), fc.integer(), fc.boolean()))),
    n: mostly(fc.integer({ min: 0, max: 10 })),
    seed: mostly(fc.integer()),
    user: mostly(fc.string({ maxLength: 300 })),
    tools: mostly(fc.array(opt({ type: mostly(fc.constant('function')), function: mostly(opt({ name: mostly(fc.string({ maxLength: 70 })), parameters: mostly(fc.jsonValue({ maxDepth: 3 })) })) }), { maxLength: 2 })),
    tool_choice: mostly(fc.constantFrom('none', 'auto', 'required')),
    metadata: mostly(fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }))),
  };
  const validChat = (stream) =>
    fc.record({ model: fc.constantFrom(...chatModels.filter((m) => !/embed/.test(m))), messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system'), content: fc.string({ maxLength: 200 }) }), { minLength: 1, maxLength: 3 }), stream: fc.constant(stream), inputs: fc.constant({ customer: 'c' }), temperature: fc.double({ min: 0, max: 2, noNaN: true }), max_tokens: fc.integer({ min: 1, max: 4000 }) }, { requiredKeys: ['model', 'messages', 'stream', 'inputs'] });
  const chat = (stream) => validOr(validChat(stream), withExtra(opt({ ...chatFields, stream: fc.oneof({ weight: 6, arbitrary: fc.constant(stream) }, { weight: 1, arbitrary: junk }) }, ['model', 'messages'])));

  const headerValue = fc.oneof(
    fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 200 }),
    fc.constantFrom(...PROTO, 'session-1', 'a'.repeat(129), 'Bearer', `Bearer ${key} extra`, 'application/json; charset=latin1', 'text/plain'),
  );
  const headers = opt(
    {
    authorization: fc.oneof({ weight: 8, arbitrary: fc.constant(`Bearer ${key}`) }, { weight: 1, arbitrary: headerValue }),
    'content-type': fc.oneof({ weight: 8, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: headerValue }),
    'gateway-session-id': headerValue,
    'x-request-id': headerValue,
    'accept-language': headerValue,
    'x-gateway-confirm': fc.oneof({ weight: 6, arbitrary: fc.constant('experiments') }, { weight: 1, arbitrary: headerValue }),
    },
    ['authorization', 'content-type'],
  );
  const query = fc.oneof(
    { weight: 6, arbitrary: fc.constant('') },
    { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 30 }), fc.string({ maxLength: 30 }), { maxKeys: 3 }).map((q) => '?' + new URLSearchParams(q).toString()) },
  );
  const body = (json) =>
    fc.oneof(
      { weight: 10, arbitrary: json.map((b) => JSON.stringify(b)) },
      { weight: 1, arbitrary: junk.map((b) => JSON.stringify(b) ?? '') },
      { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 100 }), fc.constantFrom('{', '{"model":', '[1,2', '\u0000', '')) },
    );
  const post = (path, json) => fc.tuple(body(json), headers, query).map(([b, h, q]) => ({ method: 'POST', path: path + q, headers: h, body: b }));
  const get = (paths) => fc.tuple(fc.constantFrom(...paths), headers, query).map(([p, h, q]) => ({ method: 'GET', path: p + q, headers: h }));
  const pathSegment = fc.oneof(
    fc.uuid(),
    oddString.filter((s) => s.length > 0 && s.length < 200).map((s) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')),
    fc.constantFrom('%', '%ZZ', '%FF%FE', '%C0%AF', '..%2F..', '%00', ...PROTO),
  );
  // POST /v1/responses: the Responses API's own fields (input strings and items, flat function
  // tools, text.format, reasoning), the stateful fields and hosted tools it refuses, the platform
  // hints it drops, and junk anywhere, like chat.
  const inputText = fc.oneof(
    fc.record({ type: fc.constant('input_text'), text: mostly(text) }),
    fc.record({ type: fc.constant('input_image'), image_url: mostly(fc.oneof(fc.webUrl(), fc.constant('data:image/png;base64,iVBORw0KGgo='))), detail: mostly(fc.constantFrom('auto', 'low', 'high')) }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('input_image'), file_id: fc.string({ maxLength: 10 }) }),
    fc.record({ type: fc.constant('input_file'), file_id: fc.string({ maxLength: 10 }) }),
    fc.record({ type: fc.constant('output_text'), text: mostly(text), annotations: mostly(fc.constant([])) }, { requiredKeys: ['type', 'text'] }),
    fc.record({ type: fc.constant('refusal'), refusal: mostly(text) }),
    junk,
  );
  const callId = mostly(fc.oneof(fc.constantFrom('call_1', 'call_2'), fc.string({ maxLength: 12 }), fc.constantFrom(...PROTO)));
  const inputItem = withExtra(
    fc.oneof(
      { weight: 4, arbitrary: opt({ type: mostly(fc.constant('message')), role: mostly(fc.constantFrom('user', 'system', 'developer', 'assistant', 'tool')), content: fc.oneof(mostly(text), fc.array(inputText, { maxLength: 3 })) }, ['role', 'content']) },
      { weight: 2, arbitrary: opt({ type: fc.constant('function_call'), call_id: callId, name: mostly(fc.string({ maxLength: 70 })), arguments: mostly(fc.oneof(fc.constantFrom('{}', '{"city":"Paris"}'), fc.string({ maxLength: 20 }))), id: mostly(fc.string({ maxLength: 10 })), status: mostly(fc.constantFrom('completed', 'in_progress')) }, ['type', 'call_id', 'name', 'arguments']) },
      { weight: 2, arbitrary: opt({ type: fc.constant('function_call_output'), call_id: callId, output: fc.oneof(mostly(text), fc.array(inputText, { maxLength: 2 })) }, ['type', 'call_id', 'output']) },
      { weight: 1, arbitrary: opt({ type: fc.constant('reasoning'), id: mostly(fc.string({ maxLength: 10 })), summary: mostly(fc.constant([])), content: mostly(fc.array(fc.record({ type: fc.constant('reasoning_text'), text: mostly(text) }), { maxLength: 2 })), encrypted_content: mostly(fc.string({ maxLength: 20 })) }, ['type', 'summary']) },
      { weight: 1, arbitrary: fc.record({ type: fc.constant('item_reference'), id: mostly(fc.string({ maxLength: 10 })) }) },
      { weight: 1, arbitrary: junk },
    ),
  );
  const jsonSchema = fc.oneof(
    fc.constant({ type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'London'] }, n: { type: 'integer', minimum: 1 } }, required: ['city', 'n'], additionalProperties: false }),
    fc.dictionary(fc.oneof(fc.constantFrom('type', 'properties', 'items', 'required', 'enum', '$ref', '$defs', 'anyOf', 'format', 'additionalProperties'), fc.constantFrom(...PROTO)), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
    fc.record({ type: fc.constantFrom('object', 'string', 'array', 'number', ...PROTO), properties: fc.dictionary(fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom(...PROTO)), fc.record({ type: fc.constantFrom('string', 'integer', 'boolean', 'object', 'toString') }), { maxKeys: 3 }) }),
    junk,
  );
  const responseTool = withExtra(
    fc.oneof(
      { weight: 4, arbitrary: opt({ type: mostly(fc.constant('function')), name: mostly(fc.oneof(fc.string({ maxLength: 70 }), fc.constantFrom('get_weather', ...PROTO))), description: mostly(text), parameters: mostly(jsonSchema), strict: mostly(fc.boolean()) }, ['type', 'name']) },
      { weight: 1, arbitrary: fc.record({ type: fc.constantFrom('web_search', 'web_search_preview', 'file_search', 'computer_use_preview', 'code_interpreter', 'image_generation', 'mcp', 'custom', 'local_shell', ...PROTO) }) },
      { weight: 1, arbitrary: junk },
    ),
  );
  const responsesFields = {
    model: chatFields.model,
    input: mostly(fc.oneof(text, fc.array(inputItem, { minLength: 1, maxLength: 5 }))),
    instructions: mostly(text),
    tools: mostly(fc.array(responseTool, { maxLength: 2 })),
    tool_choice: mostly(fc.oneof(fc.constantFrom('none', 'auto', 'required'), fc.record({ type: mostly(fc.constantFrom('function', 'web_search', 'allowed_tools')), name: mostly(fc.constantFrom('get_weather', 'nope', ...PROTO)) }))),
    parallel_tool_calls: mostly(fc.boolean()),
    text: mostly(opt({ format: mostly(opt({ type: mostly(fc.constantFrom('text', 'json_object', 'json_schema', 'grammar')), name: mostly(fc.oneof(fc.constantFrom('answer', ...PROTO), fc.string({ maxLength: 70 }))), schema: mostly(jsonSchema), strict: mostly(fc.boolean()), description: mostly(text) }, ['type'])), verbosity: mostly(fc.constantFrom('low', 'medium', 'high')) })),
    reasoning: mostly(opt({ effort: mostly(fc.constantFrom('none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max')), summary: mostly(fc.constantFrom('auto', 'concise', 'detailed')), generate_summary: mostly(fc.constantFrom('auto', 'concise')) })),
    max_output_tokens: mostly(fc.integer({ min: -5, max: 100_000 })),
    temperature: chatFields.temperature,
    top_p: chatFields.top_p,
    metadata: mostly(fc.dictionary(fc.oneof(fc.string({ maxLength: 70 }), fc.constantFrom(...PROTO)), mostly(fc.string({ maxLength: 520 })), { maxKeys: 3 })),
    user: chatFields.user,
  };
  // OpenAI's platform hints, accepted and dropped, in about one body of four; the stateful fields and
  // the hint values the gateway refuses in about one body of seven, so most bodies get past them.
  const hints = opt({
    store: mostly(fc.boolean()),
    service_tier: mostly(fc.constantFrom('auto', 'default', 'flex', 'priority')),
    prompt_cache_key: mostly(fc.string({ maxLength: 20 })),
    safety_identifier: mostly(fc.string({ maxLength: 20 })),
    stream_options: mostly(opt({ include_obfuscation: mostly(fc.boolean()) })),
    truncation: mostly(fc.constant('disabled')),
    background: mostly(fc.constant(false)),
    include: mostly(fc.array(fc.constantFrom('reasoning.encrypted_content', 'file_search_call.results', 'web_search_call.action.sources', 'message.input_image.image_url'), { maxLength: 3 })),
  });
  const refused = fc.oneof(
    { weight: 26, arbitrary: fc.constant({}) },
    { weight: 10, arbitrary: hints },
    { weight: 1, arbitrary: fc.record({ previous_response_id: mostly(fc.constantFrom('resp_1', ...PROTO)) }) },
    { weight: 1, arbitrary: fc.record({ conversation: mostly(fc.oneof(fc.constant('conv_1'), fc.record({ id: fc.constant('conv_1') }))) }) },
    { weight: 1, arbitrary: fc.record({ prompt: mostly(fc.record({ id: fc.constant('pmpt_1'), variables: fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })) })) }) },
    { weight: 1, arbitrary: fc.record({ context_management: junk }) },
    { weight: 1, arbitrary: fc.record({ background: mostly(fc.constant(true)), truncation: mostly(fc.constantFrom('auto', 'disabled')) }) },
    { weight: 1, arbitrary: fc.record({ include: mostly(fc.array(fc.constantFrom('message.output_text.logprobs', 'reasoning.encrypted_content', 'nope', ...PROTO), { minLength: 1, maxLength: 3 })) }) },
  );
  const validResponses = (stream) =>
    fc.record(
      {
        model: fc.constantFrom(...chatModels.filter((m) => !/embed/.test(m))),
        input: fc.oneof(fc.string({ minLength: 1, maxLength: 200 }), fc.array(fc.record({ role: fc.constantFrom('user', 'developer'), content: fc.oneof(fc.string({ maxLength: 200 }), fc.array(fc.record({ type: fc.constant('input_text'), text: fc.string({ maxLength: 100 }) }), { minLength: 1, maxLength: 2 })) }), { minLength: 1, maxLength: 3 })),
        instructions: fc.string({ maxLength: 100 }),
        stream: fc.constant(stream),
        temperature: fc.double({ min: 0, max: 2, noNaN: true }),
        max_output_tokens: fc.integer({ min: 1, max: 4000 }),
        store: fc.boolean(),
      },
      { requiredKeys: ['model', 'input', 'stream'] },
    );
  const responses = (stream) =>
    validOr(
      validResponses(stream),
      withExtra(fc.tuple(opt({ ...responsesFields, stream: fc.oneof({ weight: 6, arbitrary: fc.constant(stream) }, { weight: 1, arbitrary: junk }) }, ['model', 'input']), refused).map(([b, r]) => ({ ...b, ...r }))),
    );
  // GET /v1/models/{id}: served names, provider/model pairs raw and as %2F, Object.prototype names,
  // slashes, comma lists, trailing slashes, broken and odd percent escapes.
  const percentEncoded = (s) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  const servedIds = [...chatModels.filter((m) => !m.includes(',')), ...embeddingModels];
  const modelId = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...servedIds) },
    { weight: 2, arbitrary: fc.constantFrom(...servedIds).map((m) => m.replace(/\//g, '%2F')) },
    { weight: 1, arbitrary: fc.constantFrom(...servedIds).map((m) => `${m}/`) },
    { weight: 2, arbitrary: fc.constantFrom(...PROTO).chain((p) => fc.constantFrom(p, encodeURIComponent(p), `mock/${p}`, `${p}/mock-fast`, `${p}%2F${p}`)) },
    { weight: 2, arbitrary: fc.constantFrom('nope', 'a,b', 'bench,mock-fast', '*', '%2A', 'mock/', '/mock-fast', 'mock//mock-fast', 'a/b/c', 'meta-llama/Llama-3-8B', '..', '..%2F..', '%2e%2e', '%', '%ZZ', '%FF%FE', '%C0%AF', '%00', '%2F', 'x'.repeat(2000)) },
    { weight: 2, arbitrary: oddString.filter((s) => s.length > 0 && s.length < 200).map(percentEncoded) },
    { weight: 1, arbitrary: fc.array(fc.oneof(fc.constantFrom('mock', 'fake', 'bench', 'mock-fast', ...PROTO), fc.string({ unit: fc.constantFrom(...'abc-_.~%2F'), minLength: 1, maxLength: 8 })), { minLength: 1, maxLength: 4 }).map((a) => a.join('/')) },
  );
  const pair = opt({ provider: mostly(fc.constantFrom(...new Set(pairs.map((p) => p.provider)), 'nope', ...PROTO)), model: mostly(fc.constantFrom(...pairs.map((p) => p.model), 'nope', ...PROTO)) }, ['provider', 'model']);

  return {
    chat: post('/v1/chat/completions', chat(false)),
    chat_stream: post('/v1/chat/completions', chat(true)),
    embeddings: post(
      '/v1/embeddings',
      validOr(
        fc.record({ model: fc.constantFrom(...(embeddingModels.length ? embeddingModels : ['nope'])), input: fc.oneof(fc.string({ minLength: 1, maxLength: 100 }), fc.array(fc.string({ minLength: 1, maxLength: 50 }), { minLength: 1, maxLength: 4 })), encoding_format: fc.constantFrom('float', 'base64') }, { requiredKeys: ['model', 'input'] }),
        withExtra(opt({
          model: mostly(fc.constantFrom(...embeddingModels, ...chatModels, 'nope', ...PROTO)),
          input: mostly(fc.oneof(text, fc.array(mostly(text), { maxLength: 5 }))),
          dimensions: mostly(fc.integer({ min: -1, max: 20_000 })),
          encoding_format: mostly(fc.constantFrom('float', 'base64', 'hex')),
          user: mostly(fc.string({ maxLength: 300 })),
        }, ['model', 'input'])),
      ),
    ),
    explain: post('/v1/routing/explain', validOr(fc.record({ request: validChat(false) }), withExtra(opt({ request: mostly(chat(false)), headers: mostly(fc.dictionary(fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('gateway-session-id', 'Authorization', ...PROTO)), mostly(fc.string({ maxLength: 30 })), { maxKeys: 4 })) }, ['request'])))),
    feedback: post('/v1/feedback', withExtra(opt({ session_id: mostly(fc.oneof(fc.string({ maxLength: 130 }), fc.constantFrom('s-1', ...PROTO))), score: mostly(fc.integer({ min: -2, max: 12 })), useful: mostly(fc.boolean()) }, ['session_id', 'score', 'useful']))),
    experiments_list: get(['/v1/experiments']),
    experiments_create: post(
      '/v1/experiments',
      validOr(
        fc.record({ type: fc.constantFrom('canary', 'shadow'), baseline: fc.constant(pairs[0]), candidate: fc.constant(pairs[pairs.length > 1 ? 1 : 0]), traffic_pct: fc.double({ min: 0, max: 100, noNaN: true }) }),
        withExtra(opt({
        type: mostly(fc.constantFrom('canary', 'shadow', 'other')),
        baseline: mostly(pair),
        candidate: mostly(pair),
        traffic_pct: mostly(fc.double({ min: -10, max: 120, noNaN: true })),
        stop_rule: mostly(opt({ max_regression: mostly(fc.double({ min: -1, max: 1, noNaN: true })), min_n: mostly(fc.integer({ min: -1, max: 2_000_000 })) })),
      }, ['type', 'baseline', 'candidate', 'traffic_pct'])),
      ),
    ),
    experiments_rollback: fc.tuple(pathSegment, headers, query, fc.option(body(junk))).map(([id, h, q, b]) => ({ method: 'POST', path: `/v1/experiments/${id}/rollback${q}`, headers: h, body: b ?? undefined })),
    responses: post('/v1/responses', responses(false)),
    responses_stream: post('/v1/responses', responses(true)),
    models: get(['/v1/models', '/v1/models/']),
    models_retrieve: fc.tuple(modelId, headers, query).map(([id, h, q]) => ({ method: 'GET', path: `/v1/models/${id}${q}`, headers: h })),
    health: get(['/health', '/health/ready', '/health/providers', '/health/cache', '/health/analytics', '/health/vector']),
    metrics: get(['/metrics']),
  };
}

/**
 * Raw-socket cases: bytes written as they are, then the answer read until the server closes or
 * `waitMs` passes. `slow` writes one byte every `slow` ms. `expect` says what a pass is beyond
 * "no 5xx": `closed` = the server must close within waitMs (slow-loris), `responses` = that many
 * answers (pipelining).
 */
function rawCases(key) {
  const auth = `Authorization: Bearer ${key}\r\n`;
  const chat = '{"model":"auto","messages":[{"role":"user","content":"hi"}]}';
  const req = (head, bodyBuf = Buffer.alloc(0)) => Buffer.concat([Buffer.from(head, 'latin1'), bodyBuf]);
  const post = (path, extraHeaders, body) => {
    const b = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    return req(`POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${b.length}\r\n${extraHeaders}\r\n`, b);
  };
  const badUtf8Body = Buffer.concat([Buffer.from('{"model":"auto","messages":[{"role":"user","content":"a'), Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80]), Buffer.from('"}]}')]);
  return [
    { name: 'truncated body (Content-Length 1000, 20 bytes sent, close)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n${chat.slice(0, 20)}`), endAfterWrite: true, waitMs: 1000 },
    { name: 'truncated body (Content-Length 1000, 20 bytes sent, socket left open)', bytes: req(`POST /v1/feedback HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n${chat.slice(0, 20)}`), waitMs: 1500 },
    { name: 'truncated chunked body (no last chunk, close)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"mod\r\n`), endAfterWrite: true, waitMs: 1000 },
    { name: 'slow-loris headers (1 byte / 300 ms)', bytes: req(`GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(200)}`), slow: 300, waitMs: 25_000, expect: 'closed' },
    { name: 'pipelined requests (health, chat, feedback)', bytes: Buffer.concat([req('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'), post('/v1/chat/completions', '', chat), post('/v1/feedback', '', '{"session_id":"s","score":5,"useful":true}'), req('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')]), waitMs: 5000, expect: 4 },
    { name: 'invalid UTF-8 in the body (chat)', bytes: post('/v1/chat/completions', '', badUtf8Body), waitMs: 5000, close: true },
    { name: 'invalid UTF-8 in the body (explain)', bytes: post('/v1/routing/explain', '', Buffer.concat([Buffer.from('{"request":'), badUtf8Body, Buffer.from('}')])), waitMs: 5000, close: true },
    { name: 'invalid UTF-8 in gateway-session-id', bytes: Buffer.concat([Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n' + auth + 'Content-Type: application/json\r\nConnection: close\r\ngateway-session-id: a'), Buffer.from([0xff, 0xc0]), Buffer.from(`\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`)]), waitMs: 5000 },
    { name: 'invalid UTF-8 in Authorization', bytes: Buffer.concat([Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer '), Buffer.from([0xff, 0xfe]), Buffer.from(`\r\nContent-Type: application/json\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`)]), waitMs: 5000 },
    { name: 'invalid UTF-8 in x-request-id and the path', bytes: Buffer.concat([Buffer.from('GET /health/'), Buffer.from([0xff]), Buffer.from(' HTTP/1.1\r\nHost: x\r\nConnection: close\r\nx-request-id: '), Buffer.from([0xc3, 0x28]), Buffer.from('\r\n\r\n')]), waitMs: 5000 },
    { name: 'two different Content-Lengths', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${chat.length}\r\nContent-Length: 5\r\n\r\n${chat}`), waitMs: 5000 },
    { name: 'two equal Content-Lengths', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${chat.length}\r\nContent-Length: ${chat.length}\r\nConnection: close\r\n\r\n${chat}`), waitMs: 5000 },
    { name: 'Content-Length plus Transfer-Encoding: chunked', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${chat.length}\r\nTransfer-Encoding: chunked\r\n\r\n${chat.length.toString(16)}\r\n${chat}\r\n0\r\n\r\n`), waitMs: 5000 },
    { name: 'two Authorization headers (wrong one first)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n${auth}Content-Type: application/json\r\nConnection: close\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`), waitMs: 5000 },
    { name: 'two Authorization headers (right one first)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Authorization: Bearer nope\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`), waitMs: 5000 },
    { name: 'two Content-Types (text/plain first)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: text/plain\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`), waitMs: 5000 },
    { name: 'two X-Gateway-Confirm headers', bytes: post('/v1/experiments/00000000-0000-0000-0000-000000000000/rollback', 'X-Gateway-Confirm: nope\r\nX-Gateway-Confirm: experiments\r\nConnection: close\r\n', ''), waitMs: 5000 },
    { name: 'oversized headers (64 KiB)', bytes: req(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`), waitMs: 5000 },
    { name: 'many headers (2,000)', bytes: req(`GET /health HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 2000 }, (_, i) => `X-H${i}: v`).join('\r\n')}\r\nConnection: close\r\n\r\n`), waitMs: 5000 },
    { name: 'bad chunk size (zz)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n${chat}\r\n0\r\n\r\n`), waitMs: 5000 },
    { name: 'chunk longer than its size', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n${chat}\r\n0\r\n\r\n`), waitMs: 5000 },
    { name: 'chunk size overflow', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nab\r\n0\r\n\r\n`), waitMs: 5000 },
    { name: 'valid chunked body', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${(10).toString(16)}\r\n${chat.slice(0, 10)}\r\n${(chat.length - 10).toString(16)}\r\n${chat.slice(10)}\r\n0\r\n\r\n`), waitMs: 5000 },
    { name: 'Transfer-Encoding: gzip, chunked (unsupported coding)', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n`), waitMs: 5000 },
    { name: 'Content-Encoding: gzip on a plain body', bytes: post('/v1/chat/completions', 'Content-Encoding: gzip\r\nConnection: close\r\n', chat), waitMs: 5000 },
    { name: 'negative Content-Length', bytes: req(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: -5\r\n\r\n${chat}`), waitMs: 5000 },
    { name: 'header line without a colon', bytes: req(`GET /health HTTP/1.1\r\nHost: x\r\nthis is not a header\r\n\r\n`), waitMs: 5000 },
    { name: 'bare LF line endings', bytes: req(`GET /health HTTP/1.1\nHost: x\nConnection: close\n\n`), waitMs: 5000 },
    { name: 'garbage request line', bytes: req('\u0000\u0001GARBAGE / / HTTP/9.9\r\n\r\n'), waitMs: 5000 },
    { name: 'absolute-form URL and odd method', bytes: req(`PURGE http://evil.test/v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Connection: close\r\n\r\n`), waitMs: 5000 },
    { name: 'HTTP/1.0 without Host', bytes: req('GET /health HTTP/1.0\r\n\r\n'), waitMs: 5000 },
    { name: 'Expect: 100-continue then the body', bytes: post('/v1/feedback', 'Expect: 100-continue\r\nConnection: close\r\n', '{"session_id":"s","score":5,"useful":true}'), waitMs: 5000 },
  ];
}

module.exports = { arbitraries, rawCases, PROTO };
