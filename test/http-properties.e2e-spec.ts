/**
 * Property tests of the HTTP surface: a few hundred generated requests per endpoint, each field a
 * plausible value or junk (wrong types, huge and odd strings, unicode, nested values, unknown keys),
 * with random headers and query strings. Whatever the request, the answer is below 500, every 4xx
 * has the error envelope and every 2xx has the endpoint's shape. The offline `mock` provider serves,
 * so a run needs no network. A failure prints fast-check's seed and the shrunk request.
 */
import fc from 'fast-check';
import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { Endpoint, replyProblems, RequestSpec, send } from './support/http-check';

/** PROPERTY_RUNS=N runs more cases; FC_SEED=<the seed a failure printed> replays a failing run. */
const RUNS = Number(process.env.PROPERTY_RUNS ?? 250);
const SEED = process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined;

const YAML = `
providers:
  mock: { family: mock }
  other: { family: mock }
models:
  mock-fast: { provider: mock, type: chat, cost: { input_per_mtok: 1, output_per_mtok: 2 } }
  mock-reasoning: { provider: other, upstream: "mock-r+reasoning", type: chat, reasoning: { mode: effort } }
  mock-short: { provider: other, upstream: "mock-s+length", type: chat }
  embed: { provider: mock, type: embedding, dimensions: 8 }
routes:
  - { name: default, models: [auto], strategy: ordered, targets: [mock/mock-fast, other/mock-short] }
  - { name: learn, models: [learn], strategy: feedback_driven, targets: [mock/mock-fast, other/mock-reasoning] }
  - { name: cheap, models: [cheap], strategy: smart_cost, targets: [mock/mock-fast, other/mock-short], constraints: { max_cost_increase: 0.5 } }
  - { name: support, models: [support], targets: [mock/mock-fast], template: support }
templates:
  support: { system: "You help {{customer}}." }
firewall: { rules: [ { id: no-secrets, pattern: "api[_-]?key\\\\s*[:=]", action: block }, { id: cards, pattern: "\\\\d{4}-\\\\d{4}", action: redact } ] }
limits: { requests_per_minute_per_key: 1000000, experiment_creates_per_hour: 1000000, explain_per_minute_per_org: 1000000, explain_per_minute_per_key: 1000000 }
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
`;

// ---- values -------------------------------------------------------------------------------

const PROTO = [...Object.getOwnPropertyNames(Object.prototype), '__proto__', 'prototype'];
/** Strings a hostile client sends: empty, huge, control characters, lone surrogates, emoji, RTL, prototype names. */
const oddString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', '\udfff', '😀', '\u202e', 'a'.repeat(300), 'null', '{}', '[]', '%00', '../..', '\r\n', ...PROTO),
  fc.nat({ max: 200_000 }).map((n) => 'x'.repeat(n)),
);
const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: oddString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1e308, -0, 0.5, 2 ** 53, [], {}, [[[]]], { a: { b: { c: {} } } }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }).map((d) => JSON.parse('['.repeat(d) + ']'.repeat(d))) },
);
/** A valid value most of the time, junk otherwise. */
const mostly = <T>(valid: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: valid }, { weight: 1, arbitrary: junk });
const extraKeys = fc.dictionary(fc.oneof(oddString.filter((s) => s.length < 50), fc.constantFrom(...PROTO)), junk, { maxKeys: 2 });
const withExtra = <T extends object>(a: fc.Arbitrary<T>) =>
  fc.tuple(a, fc.oneof({ weight: 4, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: extraKeys })).map(([v, x]) => ({ ...v, ...x }));

const chatModel = fc.oneof(
  fc.constantFrom('auto', 'learn', 'cheap', 'support', 'mock-fast', 'mock/mock-fast', 'other/mock-reasoning', 'mock-short,mock-fast', 'embed', 'mock/embed', 'auto,learn,cheap', 'nope'),
  oddString,
);
const text = fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('api_key: 1', '1234-5678', '{{customer}}', '{{ missing }}'));
const contentPart = fc.oneof(
  fc.record({ type: fc.constant('text'), text: mostly(text) }),
  fc.record({ type: fc.constant('image_url'), image_url: mostly(fc.record({ url: mostly(fc.webUrl()), detail: fc.constantFrom('auto', 'low', 'high', 'x') }, { requiredKeys: ['url'] })) }),
  junk,
);
const message = withExtra(
  fc.record(
    {
      role: mostly(fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool')),
      content: fc.oneof(mostly(text), fc.array(contentPart, { maxLength: 3 })),
      name: mostly(fc.string({ maxLength: 10 })),
      tool_call_id: mostly(fc.string({ maxLength: 10 })),
      tool_calls: mostly(fc.array(fc.record({ id: mostly(fc.string()), type: mostly(fc.constant('function')), function: mostly(fc.record({ name: mostly(fc.string()), arguments: mostly(fc.string()) })) }), { maxLength: 2 })),
    },
    { requiredKeys: ['role', 'content'] },
  ),
);
const tool = fc.record({ type: mostly(fc.constant('function')), function: mostly(fc.record({ name: mostly(fc.string({ maxLength: 70 })), description: mostly(fc.string()), parameters: mostly(fc.jsonValue({ maxDepth: 3 })), strict: mostly(fc.boolean()) }, { requiredKeys: ['name'] })) });
const chatBody = withExtra(
  fc.record(
    {
      model: mostly(chatModel),
      messages: mostly(fc.array(message, { minLength: 1, maxLength: 4 })),
      temperature: mostly(fc.double({ min: -1, max: 3, noNaN: true })),
      top_p: mostly(fc.double({ min: -0.5, max: 1.5, noNaN: true })),
      frequency_penalty: mostly(fc.double({ min: -3, max: 3, noNaN: true })),
      presence_penalty: mostly(fc.double({ min: -3, max: 3, noNaN: true })),
      max_tokens: mostly(fc.integer({ min: -5, max: 100_000 })),
      max_completion_tokens: mostly(fc.integer({ min: -5, max: 100_000 })),
      stop: mostly(fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.string({ maxLength: 5 }), { maxLength: 6 }))),
      reasoning_effort: mostly(fc.constantFrom('none', 'low', 'medium', 'high', 'max')),
      response_format: mostly(fc.record({ type: fc.constantFrom('json_object', 'text', 'json_schema') })),
      stream: mostly(fc.boolean()),
      stream_options: mostly(fc.record({ include_usage: mostly(fc.boolean()) }, { requiredKeys: [] })),
      inputs: mostly(fc.dictionary(fc.constantFrom('customer', 'x', 'toString', 'valueOf'), fc.oneof(fc.string(), fc.integer(), fc.boolean()))),
      n: mostly(fc.integer({ min: 0, max: 10 })),
      seed: mostly(fc.integer()),
      user: mostly(fc.string({ maxLength: 300 })),
      tools: mostly(fc.array(tool, { maxLength: 2 })),
      tool_choice: mostly(fc.oneof(fc.constantFrom('none', 'auto', 'required'), fc.record({ type: fc.constant('function'), function: fc.record({ name: fc.string() }) }))),
      parallel_tool_calls: mostly(fc.boolean()),
      metadata: mostly(fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }))),
      logprobs: mostly(fc.boolean()),
    },
    { requiredKeys: [] },
  ),
);

// ---- requests -----------------------------------------------------------------------------

/** Header values fetch can send (visible ASCII and spaces; fetch trims the ends). */
const headerValue = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 200 }),
  fc.constantFrom(...PROTO, 'session-1', 'a'.repeat(129), 'Bearer', `Bearer ${PRO_KEY} extra`, 'application/json; charset=latin1', 'text/plain'),
);
/** The headers the gateway reads: each left as a working value, replaced, or dropped. */
const headers = (extra: Record<string, string> = {}) =>
  fc
    .record(
      {
        authorization: fc.oneof({ weight: 6, arbitrary: fc.constant(`Bearer ${PRO_KEY}`) }, { weight: 1, arbitrary: headerValue }),
        'content-type': fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: headerValue }),
        'gateway-session-id': headerValue,
        'x-request-id': headerValue,
        'accept-language': headerValue,
        'x-gateway-confirm': fc.oneof({ weight: 4, arbitrary: fc.constant('experiments') }, { weight: 1, arbitrary: headerValue }),
      },
      { requiredKeys: [] },
    )
    .map((h) => ({ ...extra, ...h }));
const query = fc.oneof(
  { weight: 4, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.dictionary(oddString.filter((s) => s.length < 60), oddString.filter((s) => s.length < 60), { maxKeys: 3 }).map((q) => '?' + new URLSearchParams(q).toString()) },
);
/** A path segment: a UUID, any string percent-encoded byte by byte, or broken escapes and invalid UTF-8. */
const pathSegment = fc.oneof(
  fc.uuid(),
  oddString.filter((s) => s.length > 0 && s.length < 200).map((s) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')),
  fc.constantFrom('%', '%ZZ', '%FF%FE', '%C0%AF', '..%2F..', '%00', '00000000-0000-0000-0000-00000000000g', ...PROTO),
);
/** The body as JSON most of the time; sometimes raw text that is not JSON at all. */
const bodyOf = (json: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 8, arbitrary: json.map((b) => ({ body: b })) },
    { weight: 1, arbitrary: junk.map((b) => ({ body: b })) },
    { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 100 }), fc.constantFrom('{', '{"model":', '[1,2', '\u0000', '')).map((raw) => ({ raw })) },
  );

function post(path: string, json: fc.Arbitrary<unknown>): fc.Arbitrary<RequestSpec> {
  return fc.tuple(bodyOf(json), headers(), query).map(([b, h, q]) => ({ method: 'POST' as const, path: path + q, headers: h, ...b }));
}

const inputPart = fc.oneof(
  fc.record({ type: fc.constantFrom('input_text', 'output_text'), text: mostly(text) }),
  fc.record({ type: fc.constant('input_image'), image_url: mostly(fc.webUrl()), detail: mostly(fc.constantFrom('auto', 'low', 'high', 'x')) }, { requiredKeys: ['type'] }),
  junk,
);
const inputItem = withExtra(
  fc.oneof(
    fc.record({ type: mostly(fc.constant('message')), role: mostly(fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool')), content: fc.oneof(mostly(text), fc.array(inputPart, { maxLength: 3 })) }, { requiredKeys: ['role', 'content'] }),
    fc.record({ type: fc.constant('function_call'), call_id: mostly(fc.string({ maxLength: 10 })), name: mostly(fc.string({ maxLength: 10 })), arguments: mostly(fc.string()) }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('function_call_output'), call_id: mostly(fc.string({ maxLength: 10 })), output: mostly(fc.oneof(fc.string(), fc.array(inputPart, { maxLength: 2 }))) }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constantFrom('reasoning', 'item_reference', 'web_search_call', ...PROTO), id: mostly(fc.string({ maxLength: 10 })) }, { requiredKeys: ['type'] }),
  ),
);
const responsesBody = withExtra(
  fc.record(
    {
      model: mostly(chatModel),
      input: mostly(fc.oneof(text, fc.array(inputItem, { maxLength: 4 }))),
      instructions: mostly(text),
      temperature: mostly(fc.double({ min: -1, max: 3, noNaN: true })),
      top_p: mostly(fc.double({ min: -0.5, max: 1.5, noNaN: true })),
      max_output_tokens: mostly(fc.integer({ min: -5, max: 100_000 })),
      reasoning: mostly(fc.record({ effort: mostly(fc.constantFrom('none', 'minimal', 'low', 'high', 'xhigh', 'max')), summary: mostly(fc.constantFrom('auto', 'x')) }, { requiredKeys: [] })),
      text: mostly(fc.record({ format: mostly(fc.oneof(fc.record({ type: fc.constantFrom('text', 'json_object', 'json_schema', 'grammar') }), fc.record({ type: fc.constant('json_schema'), name: mostly(fc.string({ maxLength: 10 })), schema: mostly(fc.jsonValue({ maxDepth: 3 })) }))) }, { requiredKeys: [] })),
      tools: mostly(fc.array(fc.record({ type: mostly(fc.constantFrom('function', 'web_search', 'mcp')), name: mostly(fc.string({ maxLength: 70 })), parameters: mostly(fc.jsonValue({ maxDepth: 3 })), strict: mostly(fc.boolean()) }, { requiredKeys: ['type'] }), { maxLength: 2 })),
      tool_choice: mostly(fc.oneof(fc.constantFrom('none', 'auto', 'required'), fc.record({ type: fc.constantFrom('function', 'web_search'), name: fc.string() }))),
      previous_response_id: mostly(fc.string({ maxLength: 10 })),
      background: mostly(fc.boolean()),
      include: mostly(fc.array(fc.constantFrom('reasoning.encrypted_content', 'message.output_text.logprobs', 'x', ...PROTO), { maxLength: 2 })),
      truncation: mostly(fc.constantFrom('auto', 'disabled')),
      metadata: mostly(fc.dictionary(fc.oneof(fc.string({ maxLength: 5 }), fc.constantFrom(...PROTO)), fc.string({ maxLength: 5 }))),
      store: mostly(fc.boolean()),
      stream: mostly(fc.boolean()),
    },
    { requiredKeys: [] },
  ),
);
const embeddingsBody = withExtra(
  fc.record(
    {
      model: mostly(fc.oneof(fc.constantFrom('embed', 'mock/embed', 'mock-fast', 'auto', 'nope'), oddString)),
      input: mostly(fc.oneof(text, fc.array(mostly(text), { maxLength: 5 }))),
      dimensions: mostly(fc.integer({ min: -1, max: 20_000 })),
      encoding_format: mostly(fc.constantFrom('float', 'base64', 'hex')),
      user: mostly(fc.string({ maxLength: 300 })),
    },
    { requiredKeys: [] },
  ),
);
const explainBody = withExtra(
  fc.record({ request: mostly(chatBody), headers: mostly(fc.dictionary(fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('gateway-session-id', 'Authorization', 'x-forwarded-for', ...PROTO)), mostly(fc.string({ maxLength: 30 })), { maxKeys: 4 })) }, { requiredKeys: [] }),
);
const feedbackBody = withExtra(
  fc.record({ session_id: mostly(fc.oneof(fc.string({ maxLength: 130 }), fc.constantFrom('s-1', ...PROTO))), score: mostly(fc.integer({ min: -2, max: 12 })), useful: mostly(fc.boolean()) }, { requiredKeys: [] }),
);
const pair = fc.record({ provider: mostly(fc.constantFrom('mock', 'other', 'nope', ...PROTO)), model: mostly(fc.constantFrom('mock-fast', 'mock-short', 'mock-reasoning', 'embed', ...PROTO)) }, { requiredKeys: [] });
const experimentBody = withExtra(
  fc.record(
    {
      type: mostly(fc.constantFrom('canary', 'shadow', 'other')),
      baseline: mostly(pair),
      candidate: mostly(pair),
      traffic_pct: mostly(fc.double({ min: -10, max: 120, noNaN: true })),
      stop_rule: mostly(fc.record({ max_regression: mostly(fc.double({ min: -1, max: 1, noNaN: true })), min_n: mostly(fc.integer({ min: -1, max: 2_000_000 })) }, { requiredKeys: [] })),
    },
    { requiredKeys: [] },
  ),
);

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML });
});
afterAll(() => t?.close());

/** One request → its problems; a failing property shows the request that fast-check shrank to. */
async function check(endpoint: Endpoint, req: RequestSpec): Promise<void> {
  const stream = typeof req.body === 'object' && req.body !== null && (req.body as { stream?: unknown }).stream === true;
  const r = await send(t.url, req);
  const problems = replyProblems(endpoint, r, { stream });
  if (problems.length > 0) throw new Error(problems.join('\n'));
}

// Shrinking stops after 20 s: each step is a request, and the first counterexample is already reported.
const property = (endpoint: Endpoint, arb: fc.Arbitrary<RequestSpec>) =>
  fc.assert(fc.asyncProperty(arb, (req) => check(endpoint, req)), { numRuns: RUNS, seed: SEED, interruptAfterTimeLimit: 60_000, skipAllAfterTimeLimit: 20_000, markInterruptAsFailure: true });

jest.setTimeout(120_000);

describe('generated requests: status < 500, every 4xx with the envelope, every 2xx with the shape', () => {
  it('POST /v1/chat/completions (JSON and stream)', () => property('chat', post('/v1/chat/completions', chatBody)));
  it('POST /v1/responses (JSON and stream)', () => property('responses', post('/v1/responses', responsesBody)));
  it('POST /v1/embeddings', () => property('embeddings', post('/v1/embeddings', embeddingsBody)));
  it('POST /v1/routing/explain', () => property('explain', post('/v1/routing/explain', explainBody)));
  it('POST /v1/feedback', () => property('feedback', post('/v1/feedback', feedbackBody)));
  it('POST /v1/experiments', () => property('experiments-create', post('/v1/experiments', experimentBody)));
  it('POST /v1/experiments/{id}/rollback', () =>
    property(
      'experiments-rollback',
      fc
        .tuple(pathSegment, headers(), query, fc.option(junk))
        .map(([id, h, q, b]) => ({ method: 'POST' as const, path: `/v1/experiments/${id}/rollback${q}`, headers: h, ...(b === null ? {} : { body: b }) })),
    ));
  it('GET /v1/experiments', () => property('experiments-list', fc.tuple(headers(), query).map(([h, q]) => ({ method: 'GET' as const, path: `/v1/experiments${q}`, headers: h }))));
  it('GET /health/*, /metrics', () =>
    property(
      'health',
      fc.tuple(fc.constantFrom('/health', '/health/live', '/health/ready', '/health/providers', '/health/cache', '/health/analytics', '/health/vector'), headers(), query).map(([p, h, q]) => ({ method: 'GET' as const, path: p + q, headers: h })),
    ));
});
