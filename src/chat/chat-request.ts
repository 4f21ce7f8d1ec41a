import { absent, bool, fail, int, isObject, num, str } from '../common/http/body-checks';
import { refsOf, resolveRef } from '../providers/json-schema/json-schema';
import type {
  ChatMessage, ChatRequest, ContentPart, JsonSchemaFormat, ReasoningEffort, ResponseFormat, Role, ToolCall, ToolChoice, ToolDefinition,
} from '../providers/provider-adapter';

/** A validated chat body: the normalised request plus what the gateway itself consumes. */
export interface ChatCall {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** Template variables (`inputs`), never forwarded. */
  inputs?: Record<string, string | number | boolean>;
  request: ChatRequest;
}

const ROLES: readonly Role[] = ['system', 'developer', 'user', 'assistant', 'tool'];
const EFFORTS: readonly ReasoningEffort[] = ['none', 'low', 'medium', 'high'];
/** OpenAI fields that are hints for OpenAI's own platform; accepted and not forwarded. */
const IGNORED = new Set(['metadata', 'store', 'service_tier', 'prompt_cache_key', 'safety_identifier', 'logprobs']);
const KNOWN = new Set([
  'model', 'messages', 'temperature', 'max_completion_tokens', 'max_tokens', 'top_p', 'frequency_penalty', 'presence_penalty',
  'stop', 'reasoning_effort', 'response_format', 'stream', 'stream_options', 'inputs', 'n', 'seed', 'user', 'tools',
  'tool_choice', 'parallel_tool_calls',
]);
export const MAX_N = 8;

const MESSAGE_FIELDS = new Set(['role', 'content', 'name', 'tool_calls', 'tool_call_id', 'refusal']);
const INPUT_TYPES = new Set(['string', 'number', 'boolean']);

function contentParts(v: unknown[], param: string, role: Role): ContentPart[] {
  return v.map((p, i) => {
    const at = `${param}.${i}`;
    if (!isObject(p)) return fail(at, `${at} must be a content part object.`);
    if (p.type === 'text') {
      return { type: 'text', text: str(p.text, `${at}.text`) };
    }
    if (p.type === 'image_url' && role === 'user') {
      if (!isObject(p.image_url)) return fail(`${at}.image_url`, `${at}.image_url must be an object with a url.`);
      const detail = p.image_url.detail;
      if (detail !== undefined && detail !== 'auto' && detail !== 'low' && detail !== 'high') {
        return fail(`${at}.image_url.detail`, `${at}.image_url.detail must be auto, low or high.`);
      }
      return { type: 'image_url', image_url: { url: str(p.image_url.url, `${at}.image_url.url`, { nonEmpty: true }), ...(detail ? { detail } : {}) } };
    }
    return fail(`${at}.type`, `content part type ${JSON.stringify(p.type)} is not supported in a ${role} message.`);
  });
}

function toolCalls(v: unknown, param: string): ToolCall[] {
  if (!Array.isArray(v) || v.length === 0) return fail(param, `${param} must be a non-empty array.`);
  return v.map((c, i) => {
    const at = `${param}.${i}`;
    if (!isObject(c) || c.type !== 'function' || !isObject(c.function)) return fail(at, `${at} must be a function tool call.`);
    return {
      id: str(c.id, `${at}.id`, { nonEmpty: true }),
      type: 'function',
      function: { name: str(c.function.name, `${at}.function.name`, { nonEmpty: true }), arguments: str(c.function.arguments, `${at}.function.arguments`) },
    };
  });
}

function message(v: unknown, i: number): ChatMessage {
  const at = `messages.${i}`;
  if (!isObject(v)) return fail(at, `${at} must be an object.`);
  for (const k of Object.keys(v)) {
    if (!MESSAGE_FIELDS.has(k)) return fail(`${at}.${k}`, `${at}.${k} is not a supported message field.`);
  }
  if (!ROLES.includes(v.role as Role)) return fail(`${at}.role`, `${at}.role must be one of ${ROLES.join(', ')}.`);
  const role = v.role as Role;
  const m: ChatMessage = { role, content: null };
  if (v.name !== undefined) m.name = str(v.name, `${at}.name`, { max: 256 });
  if (!absent(v.tool_calls)) {
    if (role !== 'assistant') return fail(`${at}.tool_calls`, 'tool_calls are allowed on assistant messages only.');
    m.tool_calls = toolCalls(v.tool_calls, `${at}.tool_calls`);
  }
  if (role === 'tool') m.tool_call_id = str(v.tool_call_id, `${at}.tool_call_id`, { nonEmpty: true });
  else if (v.tool_call_id !== undefined) return fail(`${at}.tool_call_id`, 'tool_call_id is allowed on tool messages only.');
  const c = v.content;
  if (typeof c === 'string') m.content = c;
  else if (Array.isArray(c) && c.length > 0) m.content = contentParts(c, `${at}.content`, role);
  else if ((c === null || c === undefined) && role === 'assistant' && m.tool_calls) m.content = null;
  else return fail(`${at}.content`, `${at}.content must be a string${role === 'user' ? ' or an array of content parts' : ''}.`);
  return m;
}

function tools(v: unknown): ToolDefinition[] {
  if (!Array.isArray(v)) return fail('tools', 'tools must be an array.');
  if (v.length > 128) return fail('tools', 'tools must have at most 128 entries.');
  return v.map((t, i) => {
    const at = `tools.${i}`;
    if (!isObject(t) || t.type !== 'function' || !isObject(t.function)) return fail(at, `${at} must be a function tool.`);
    const f = t.function;
    if (f.parameters !== undefined && !isObject(f.parameters)) return fail(`${at}.function.parameters`, 'parameters must be a JSON Schema object.');
    if (f.strict !== undefined && typeof f.strict !== 'boolean') return fail(`${at}.function.strict`, 'strict must be a boolean.');
    return {
      type: 'function',
      function: {
        name: str(f.name, `${at}.function.name`, { nonEmpty: true, max: 64 }),
        ...(f.description !== undefined ? { description: str(f.description, `${at}.function.description`) } : {}),
        ...(f.parameters !== undefined ? { parameters: f.parameters as Record<string, unknown> } : {}),
        ...(f.strict !== undefined ? { strict: f.strict as boolean } : {}),
      },
    };
  });
}

function toolChoice(v: unknown): ToolChoice {
  if (v === 'none' || v === 'auto' || v === 'required') return v;
  if (isObject(v) && v.type === 'function' && isObject(v.function)) {
    return { type: 'function', function: { name: str(v.function.name, 'tool_choice.function.name', { nonEmpty: true }) } };
  }
  return fail('tool_choice', 'tool_choice must be none, auto, required or {"type":"function","function":{"name":...}}.');
}

const SCHEMA_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const JSON_SCHEMA_FIELDS = new Set(['name', 'description', 'schema', 'strict']);

/**
 * `response_format`: `text`, `json_object`, or `json_schema` with `{name, description?, schema,
 * strict?}` as OpenAI takes it. The schema's `$ref`s must be local and resolve: every path that
 * cannot pass a schema through (Gemini's converted schema, the mock) follows them, and an upstream
 * that can would refuse a dangling one with a 400 of its own.
 */
function responseFormat(rf: unknown): ResponseFormat | undefined {
  const usage = 'response_format must be {"type":"text"}, {"type":"json_object"} or {"type":"json_schema","json_schema":{...}}.';
  if (!isObject(rf)) return fail('response_format', usage);
  if (rf.type === 'text' || rf.type === 'json_object') {
    if (Object.keys(rf).length !== 1) return fail('response_format', usage);
    return rf.type === 'json_object' ? { type: 'json_object' } : undefined;
  }
  if (rf.type !== 'json_schema') return fail('response_format.type', 'response_format.type must be text, json_object or json_schema.');
  for (const k of Object.keys(rf)) if (k !== 'type' && k !== 'json_schema') return fail(`response_format.${k}`, `response_format.${k} is not supported.`);
  const js = rf.json_schema;
  const at = 'response_format.json_schema';
  if (!isObject(js)) return fail(at, `${at} must be an object with name and schema.`);
  return { type: 'json_schema', json_schema: jsonSchemaFormat(js, at, JSON_SCHEMA_FIELDS) };
}

/**
 * `{name, description?, schema, strict?}` of a json_schema format, at `at` (chat nests it under
 * `response_format.json_schema`, the Responses API flattens it into `text.format`); `fields` are the
 * keys the object may have.
 */
export function jsonSchemaFormat(js: Record<string, unknown>, at: string, fields: ReadonlySet<string>): JsonSchemaFormat {
  for (const k of Object.keys(js)) if (!fields.has(k)) return fail(`${at}.${k}`, `${at}.${k} is not supported.`);
  const name = str(js.name, `${at}.name`);
  if (!SCHEMA_NAME.test(name)) return fail(`${at}.name`, `${at}.name must be 1 to 64 characters of letters, digits, _ and -.`);
  if (!isObject(js.schema)) return fail(`${at}.schema`, `${at}.schema must be a JSON Schema object.`);
  const schema = js.schema;
  for (const ref of refsOf(schema)) {
    if (resolveRef(schema, ref) === undefined) return fail(`${at}.schema`, `${at}.schema: $ref ${JSON.stringify(ref.slice(0, 200))} does not resolve to a local definition.`);
  }
  if (js.strict !== undefined && typeof js.strict !== 'boolean') return fail(`${at}.strict`, `${at}.strict must be a boolean.`);
  return {
    name,
    ...(js.description !== undefined ? { description: str(js.description, `${at}.description`) } : {}),
    schema,
    ...(js.strict !== undefined ? { strict: js.strict } : {}),
  };
}

/**
 * Validation of the chat body (docs/api.md "POST /v1/chat/completions"):
 * every documented field and range, the other OpenAI fields SDKs send, and nothing else. Hand-written
 * rather than class-validator: it runs on every request, on bodies up to 4 MiB. The first failure is
 * 400 `invalid_request` with `param`; no provider is called.
 */
export function parseChatBody(body: unknown): ChatCall {
  if (!isObject(body)) return fail('body', 'The request body must be a JSON object.');
  for (const k of Object.keys(body)) {
    if (!KNOWN.has(k) && !IGNORED.has(k)) return fail(k, `${k} is not a supported field.`);
  }
  const model = str(body.model, 'model', { nonEmpty: true, max: 1024 });
  if (!Array.isArray(body.messages) || body.messages.length === 0) return fail('messages', 'messages must be a non-empty array.');
  const request: ChatRequest = { messages: body.messages.map(message) };
  // The fields are checked in this order, so a body with several faults always names the same one.
  readGeneration(body, request);
  const { stream, includeUsage } = readStreaming(body);
  readChoicesAndTools(body, request);
  return { model, stream, includeUsage, inputs: readInputs(body), request };
}

/** Sampling, the token limit, stop sequences, reasoning effort and the response format. */
function readGeneration(body: Record<string, unknown>, req: ChatRequest): void {
  const temperature = num(body, 'temperature', 0, 2);
  if (temperature !== undefined) req.temperature = temperature;
  const topP = num(body, 'top_p', 0, 1);
  if (topP !== undefined) req.top_p = topP;
  const fp = num(body, 'frequency_penalty', -2, 2);
  if (fp !== undefined) req.frequency_penalty = fp;
  const pp = num(body, 'presence_penalty', -2, 2);
  if (pp !== undefined) req.presence_penalty = pp;
  // Contract: max_tokens is the legacy alias; when both are sent, max_completion_tokens wins.
  const maxTokens = int(body, 'max_tokens', 1);
  const maxCompletion = int(body, 'max_completion_tokens', 1);
  if (maxCompletion !== undefined || maxTokens !== undefined) req.max_completion_tokens = maxCompletion ?? maxTokens;

  if (!absent(body.stop)) {
    // The contract documents an array; a single string (which OpenAI SDKs allow) is taken as one entry.
    const stop = typeof body.stop === 'string' ? [body.stop] : body.stop;
    if (!Array.isArray(stop) || stop.length > 4) return fail('stop', 'stop must be an array of at most 4 strings.');
    req.stop = stop.map((s, i) => str(s, `stop.${i}`, { nonEmpty: true }));
  }
  if (!absent(body.reasoning_effort)) {
    if (!EFFORTS.includes(body.reasoning_effort as ReasoningEffort)) return fail('reasoning_effort', `reasoning_effort must be one of ${EFFORTS.join(', ')}.`);
    req.reasoning_effort = body.reasoning_effort as ReasoningEffort;
  }
  if (!absent(body.response_format)) {
    const rf = responseFormat(body.response_format);
    if (rf) req.response_format = rf;
  }
}

/** `stream`, and `stream_options` (only with a stream): whether the final usage chunk is sent. */
function readStreaming(body: Record<string, unknown>): { stream: boolean; includeUsage: boolean } {
  const stream = bool(body, 'stream') ?? false;
  let includeUsage = false;
  if (!absent(body.stream_options)) {
    const so = body.stream_options;
    if (!stream) return fail('stream_options', 'stream_options is only allowed when stream is true.');
    if (!isObject(so)) return fail('stream_options', 'stream_options must be an object.');
    for (const k of Object.keys(so)) if (k !== 'include_usage' && k !== 'include_obfuscation') return fail(`stream_options.${k}`, `stream_options.${k} is not supported.`);
    if (so.include_usage !== undefined && typeof so.include_usage !== 'boolean') return fail('stream_options.include_usage', 'include_usage must be a boolean.');
    includeUsage = so.include_usage === true;
  }
  return { stream, includeUsage };
}

/** `n`, `seed`, `user`, the tools and how they are chosen; `logprobs` only as false. */
function readChoicesAndTools(body: Record<string, unknown>, req: ChatRequest): void {
  const n = int(body, 'n', 1, MAX_N);
  if (n !== undefined && n > 1) req.n = n;
  const seed = int(body, 'seed', Number.MIN_SAFE_INTEGER);
  if (seed !== undefined) req.seed = seed;
  if (!absent(body.user)) req.user = str(body.user, 'user', { max: 256 });
  if (!absent(body.tools)) req.tools = tools(body.tools);
  if (!absent(body.tool_choice)) {
    if (!req.tools) return fail('tool_choice', 'tool_choice needs tools.');
    req.tool_choice = toolChoice(body.tool_choice);
  }
  const parallelToolCalls = bool(body, 'parallel_tool_calls');
  if (parallelToolCalls !== undefined) req.parallel_tool_calls = parallelToolCalls;
  if (!absent(body.logprobs) && body.logprobs !== false) return fail('logprobs', 'logprobs is not supported.');
}

/** The template variables (`inputs`): strings, numbers or booleans, never forwarded. */
function readInputs(body: Record<string, unknown>): ChatCall['inputs'] {
  if (absent(body.inputs)) return undefined;
  if (!isObject(body.inputs)) return fail('inputs', 'inputs must be an object of strings, numbers or booleans.');
  for (const [k, v] of Object.entries(body.inputs)) {
    if (!INPUT_TYPES.has(typeof v)) return fail(`inputs.${k}`, `inputs.${k} must be a string, number or boolean.`);
  }
  return body.inputs as ChatCall['inputs'];
}
