import { ChatCall, jsonSchemaFormat } from '../chat/chat-request';
import { absent, bool, fail, int, isObject, num, str, typeName } from '../common/http/body-checks';
import type {
  ChatMessage, ChatRequest, ContentPart, ReasoningEffort, ResponseFormat, ToolCall, ToolChoice, ToolDefinition,
} from '../providers/provider-adapter';

/**
 * What the answer echoes of the request, as OpenAI's Response object does (validated values, the
 * API's defaults where the request left a field out).
 */
export interface ResponsesEcho {
  instructions: string | null;
  tools: Array<{ type: 'function'; name: string; description: string | null; parameters: Record<string, unknown> | null; strict: boolean | null }>;
  tool_choice: unknown;
  parallel_tool_calls: boolean;
  temperature: number | null;
  top_p: number | null;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  text: Record<string, unknown>;
  reasoning: { effort: string | null; summary: string | null };
  user?: string;
}

/** A validated Responses body: the chat pipeline's call plus what the answer echoes. */
export interface ResponsesCall {
  chat: ChatCall;
  echo: ResponsesEcho;
}

/**
 * Fields that ask OpenAI to keep or fetch state. The gateway is stateless (it stores no responses,
 * conversations or prompts), so honouring them is impossible and dropping them would answer a
 * different question than the one asked: each is refused, saying why.
 */
const STATEFUL: Record<string, string> = {
  previous_response_id: 'previous_response_id is not supported: the gateway is stateless and stores no responses; send the whole conversation in input.',
  conversation: 'conversation is not supported: the gateway is stateless and stores no conversations; send the whole conversation in input.',
  prompt: 'prompt is not supported: reusable prompts are stored on OpenAI\'s platform; send instructions and input instead.',
  context_management: 'context_management is not supported: the gateway keeps no conversation state to compact; send the input to use.',
};

/** OpenAI hints for its own platform: accepted and not forwarded (`store` has no effect: nothing is stored). */
const IGNORED = new Set(['store', 'service_tier', 'prompt_cache_key', 'prompt_cache_retention', 'safety_identifier']);
const KNOWN = new Set([
  'model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'reasoning', 'max_output_tokens',
  'temperature', 'top_p', 'metadata', 'user', 'stream', 'stream_options', 'background', 'truncation', 'include',
  ...Object.keys(STATEFUL),
]);

/**
 * `include` values: those about hosted tools' outputs ask for nothing (hosted tools are refused);
 * `reasoning.encrypted_content` asks for reasoning state to send back, which a stateless gateway
 * carries none of (reasoning items sent back are accepted and dropped); input image URLs are in the
 * input already. Logprobs are refused, as chat refuses them.
 */
const INCLUDABLE = new Set([
  'reasoning.encrypted_content', 'message.input_image.image_url', 'file_search_call.results', 'web_search_call.results',
  'web_search_call.action.sources', 'code_interpreter_call.outputs', 'computer_call_output.output.image_url',
]);

const EFFORTS: Readonly<Record<string, ReasoningEffort>> = { none: 'none', minimal: 'low', low: 'low', medium: 'medium', high: 'high', xhigh: 'high' };
const SUMMARIES = new Set(['auto', 'concise', 'detailed']);
const MESSAGE_ROLES = new Set(['user', 'system', 'developer', 'assistant']);
const MESSAGE_ITEM_FIELDS = new Set(['type', 'role', 'content', 'id', 'status', 'phase']);
const CALL_ITEM_FIELDS = new Set(['type', 'call_id', 'name', 'arguments', 'id', 'status', 'namespace']);
const OUTPUT_ITEM_FIELDS = new Set(['type', 'call_id', 'output', 'id', 'status']);
const FUNCTION_TOOL_FIELDS = new Set(['type', 'name', 'description', 'parameters', 'strict']);
const JSON_SCHEMA_FORMAT_FIELDS = new Set(['type', 'name', 'description', 'schema', 'strict']);

function onlyKeys(v: Record<string, unknown>, allowed: ReadonlySet<string>, at: string): void {
  for (const k of Object.keys(v)) if (!allowed.has(k)) fail(`${at}.${k}`, `${at}.${k} is not a supported field.`);
}

/** A message item's content as chat content: text parts (and images from the user) in order. */
function content(v: unknown, at: string, role: string): string | ContentPart[] {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v) || v.length === 0) return fail(at, `${at} must be a string or a non-empty array of content parts.`);
  const parts = v.map((p, j): ContentPart => {
    const pat = `${at}.${j}`;
    if (!isObject(p)) return fail(pat, `${pat} must be a content part object.`);
    const type = p.type;
    if (type === 'input_text' || (role === 'assistant' && type === 'output_text')) {
      onlyKeys(p, type === 'input_text' ? new Set(['type', 'text']) : new Set(['type', 'text', 'annotations', 'logprobs']), pat);
      return { type: 'text', text: str(p.text, `${pat}.text`) };
    }
    if (role === 'assistant' && type === 'refusal') return { type: 'text', text: str(p.refusal, `${pat}.refusal`) };
    if (type === 'input_image' && role === 'user') {
      onlyKeys(p, new Set(['type', 'image_url', 'detail', 'file_id']), pat);
      if (!absent(p.file_id)) return fail(`${pat}.file_id`, `${pat}.file_id is not supported: files live in OpenAI's file storage, which the gateway does not have; send image_url.`);
      const detail = p.detail;
      if (!absent(detail) && detail !== 'auto' && detail !== 'low' && detail !== 'high') return fail(`${pat}.detail`, `${pat}.detail must be auto, low or high.`);
      const url = str(p.image_url, `${pat}.image_url`, { nonEmpty: true });
      return { type: 'image_url', image_url: { url, ...(detail ? { detail: detail as 'auto' | 'low' | 'high' } : {}) } };
    }
    if (type === 'input_file') return fail(`${pat}.type`, `${pat}: input_file is not supported: the gateway has no file storage and no family takes files.`);
    return fail(`${pat}.type`, `content part type ${JSON.stringify(type)} is not supported in a ${role} message.`);
  });
  // Only a user message may carry images; the other roles' text parts are one string, as chat sends them.
  if (role === 'user' && parts.some((p) => p.type !== 'text')) return parts;
  return parts.map((p) => (p as { text: string }).text).join('');
}

function functionCallOutput(v: unknown, at: string): string {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v)) return fail(at, `${at} must be a string or an array of input_text parts.`);
  return v
    .map((p, j) => {
      if (!isObject(p) || p.type !== 'input_text') return fail(`${at}.${j}`, `${at}.${j}: only input_text parts can be sent back as a function result.`);
      return str(p.text, `${at}.${j}.text`);
    })
    .join('');
}

/** Input items as chat messages: a function call joins the assistant message before it, as chat carries tool calls. */
function inputItems(items: unknown[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  items.forEach((item, i) => {
    const at = `input.${i}`;
    if (!isObject(item)) return fail(at, `${at} must be an input item object.`);
    const type = absent(item.type) ? 'message' : item.type;
    if (type === 'message') {
      onlyKeys(item, MESSAGE_ITEM_FIELDS, at);
      const role = item.role;
      if (typeof role !== 'string' || !MESSAGE_ROLES.has(role)) return fail(`${at}.role`, `${at}.role must be one of user, system, developer, assistant.`);
      messages.push({ role: role as ChatMessage['role'], content: content(item.content, `${at}.content`, role) });
      return;
    }
    if (type === 'function_call') {
      onlyKeys(item, CALL_ITEM_FIELDS, at);
      const call: ToolCall = {
        id: str(item.call_id, `${at}.call_id`, { nonEmpty: true }),
        type: 'function',
        function: { name: str(item.name, `${at}.name`, { nonEmpty: true }), arguments: str(item.arguments, `${at}.arguments`) },
      };
      const last = messages[messages.length - 1];
      if (last?.role === 'assistant') (last.tool_calls ??= []).push(call);
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      return;
    }
    if (type === 'function_call_output') {
      onlyKeys(item, OUTPUT_ITEM_FIELDS, at);
      const id = str(item.call_id, `${at}.call_id`, { nonEmpty: true });
      messages.push({ role: 'tool', tool_call_id: id, content: functionCallOutput(item.output, `${at}.output`) });
      return;
    }
    // Reasoning a client sends back belongs to the model that wrote it, which may not be the next
    // target; the gateway carries no reasoning state across turns, so the item is dropped.
    if (type === 'reasoning') return;
    if (type === 'item_reference') return fail(`${at}.type`, `${at}: item_reference is not supported: the gateway is stateless and stores no items; send the item itself.`);
    return fail(`${at}.type`, `${at}.type ${JSON.stringify(type)} is not supported: input items are message, function_call, function_call_output and reasoning.`);
  });
  return messages;
}

function tools(v: unknown): { defs: ToolDefinition[]; echo: ResponsesEcho['tools'] } {
  if (!Array.isArray(v)) return fail('tools', 'tools must be an array.');
  if (v.length > 128) return fail('tools', 'tools must have at most 128 entries.');
  const defs: ToolDefinition[] = [];
  const echo: ResponsesEcho['tools'] = [];
  v.forEach((t, i) => {
    const at = `tools.${i}`;
    if (!isObject(t)) return fail(at, `${at} must be a tool object.`);
    if (t.type !== 'function') {
      return fail(`${at}.type`, `${at}.type ${JSON.stringify(t.type)} is not supported: hosted tools run on OpenAI's platform, which the gateway does not have; only function tools are supported.`);
    }
    onlyKeys(t, FUNCTION_TOOL_FIELDS, at);
    const name = str(t.name, `${at}.name`, { nonEmpty: true, max: 64 });
    const description = absent(t.description) ? undefined : str(t.description, `${at}.description`);
    if (!absent(t.parameters) && !isObject(t.parameters)) return fail(`${at}.parameters`, 'parameters must be a JSON Schema object.');
    if (!absent(t.strict) && typeof t.strict !== 'boolean') return fail(`${at}.strict`, 'strict must be a boolean.');
    const parameters = absent(t.parameters) ? undefined : t.parameters;
    const strict = absent(t.strict) ? undefined : (t.strict as boolean);
    defs.push({
      type: 'function',
      function: { name, ...(description !== undefined ? { description } : {}), ...(parameters ? { parameters } : {}), ...(strict !== undefined ? { strict } : {}) },
    });
    echo.push({ type: 'function', name, description: description ?? null, parameters: parameters ?? null, strict: strict ?? null });
  });
  return { defs, echo };
}

function toolChoice(v: unknown): ToolChoice {
  if (v === 'none' || v === 'auto' || v === 'required') return v;
  if (isObject(v) && v.type === 'function') {
    onlyKeys(v, new Set(['type', 'name']), 'tool_choice');
    return { type: 'function', function: { name: str(v.name, 'tool_choice.name', { nonEmpty: true }) } };
  }
  return fail('tool_choice', 'tool_choice must be none, auto, required or {"type":"function","name":...}: only function tools are supported.');
}

function textFormat(text: unknown): { format?: ResponseFormat; echo: Record<string, unknown> } {
  if (!isObject(text)) return fail('text', 'text must be an object.');
  onlyKeys(text, new Set(['format', 'verbosity']), 'text');
  const echo: Record<string, unknown> = { format: { type: 'text' } };
  // verbosity is a hint to OpenAI's own models; accepted and not forwarded.
  if (!absent(text.verbosity)) {
    if (text.verbosity !== 'low' && text.verbosity !== 'medium' && text.verbosity !== 'high') return fail('text.verbosity', 'text.verbosity must be low, medium or high.');
    echo.verbosity = text.verbosity;
  }
  const f = text.format;
  if (absent(f)) return { echo };
  if (!isObject(f)) return fail('text.format', 'text.format must be an object.');
  if (f.type === 'text' || f.type === 'json_object') {
    onlyKeys(f, new Set(['type']), 'text.format');
    echo.format = { type: f.type };
    return { format: f.type === 'json_object' ? { type: 'json_object' } : undefined, echo };
  }
  if (f.type !== 'json_schema') return fail('text.format.type', 'text.format.type must be text, json_object or json_schema.');
  const js = jsonSchemaFormat(f, 'text.format', JSON_SCHEMA_FORMAT_FIELDS);
  echo.format = { type: 'json_schema', ...js };
  return { format: { type: 'json_schema', json_schema: js }, echo };
}

function reasoning(v: unknown): { effort?: ReasoningEffort; echo: ResponsesEcho['reasoning'] } {
  if (!isObject(v)) return fail('reasoning', 'reasoning must be an object.');
  onlyKeys(v, new Set(['effort', 'summary', 'generate_summary']), 'reasoning');
  const echo: ResponsesEcho['reasoning'] = { effort: null, summary: null };
  let effort: ReasoningEffort | undefined;
  if (!absent(v.effort)) {
    effort = typeof v.effort === 'string' && Object.prototype.hasOwnProperty.call(EFFORTS, v.effort) ? EFFORTS[v.effort] : undefined;
    if (!effort) return fail('reasoning.effort', `reasoning.effort must be one of ${Object.keys(EFFORTS).join(', ')}.`);
    echo.effort = v.effort as string;
  }
  // Summaries are OpenAI's rewrite of its own reasoning; the gateway returns the reasoning text a
  // family gives (as a reasoning item), so the wish is accepted and has no effect.
  for (const k of ['summary', 'generate_summary'] as const) {
    if (absent(v[k])) continue;
    if (typeof v[k] !== 'string' || !SUMMARIES.has(v[k] as string)) return fail(`reasoning.${k}`, `reasoning.${k} must be auto, concise or detailed.`);
    echo.summary = v[k] as string;
  }
  return { effort, echo };
}

function metadata(v: unknown): Record<string, string> {
  if (!isObject(v)) return fail('metadata', 'metadata must be an object of strings.');
  const keys = Object.keys(v);
  if (keys.length > 16) return fail('metadata', 'metadata must have at most 16 keys.');
  for (const k of keys) {
    if (k.length > 64) return fail('metadata', 'metadata keys must be at most 64 characters.');
    str(v[k], `metadata.${k}`, { max: 512 });
  }
  return v as Record<string, string>;
}

/**
 * Validation of a `POST /v1/responses` body and its mapping onto the chat pipeline's request: the
 * Responses API's fields (OpenAI's SDK types are the reference for their shapes), the stateful ones
 * refused saying why, OpenAI's platform hints accepted and dropped, and nothing else. The first
 * failure is 400 `invalid_request` with `param`; no provider is called.
 */
export function parseResponsesBody(body: unknown): ResponsesCall {
  if (!isObject(body)) return fail('body', 'The request body must be a JSON object.');
  for (const k of Object.keys(body)) {
    if (!KNOWN.has(k) && !IGNORED.has(k)) return fail(k, `${k} is not a supported field.`);
  }
  for (const k in STATEFUL) if (!absent(body[k])) return fail(k, STATEFUL[k]);
  if (!absent(body.background) && body.background !== false) {
    if (body.background !== true) return fail('background', 'background must be a boolean.');
    return fail('background', 'background: true is not supported: the gateway is stateless and keeps no response to poll for; use stream: true for long answers.');
  }
  if (!absent(body.truncation) && body.truncation !== 'disabled') {
    if (body.truncation === 'auto') return fail('truncation', 'truncation "auto" is not supported: the gateway never drops input items; send "disabled" or leave it out.');
    return fail('truncation', 'truncation must be "disabled".');
  }
  if (!absent(body.include)) {
    if (!Array.isArray(body.include)) return fail('include', 'include must be an array.');
    body.include.forEach((v, i) => {
      if (v === 'message.output_text.logprobs') fail(`include.${i}`, 'message.output_text.logprobs is not supported: the gateway returns no logprobs.');
      if (typeof v !== 'string' || !INCLUDABLE.has(v)) fail(`include.${i}`, `include.${i} ${typeof v === 'string' ? JSON.stringify(v.slice(0, 100)) : typeName(v)} is not a supported value.`);
    });
  }

  const model = str(body.model, 'model', { nonEmpty: true, max: 1024 });
  const instructions = absent(body.instructions) ? null : str(body.instructions, 'instructions');
  const messages: ChatMessage[] = instructions !== null ? [{ role: 'system', content: instructions }] : [];
  if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
  else if (Array.isArray(body.input)) messages.push(...inputItems(body.input));
  else if (!absent(body.input)) return fail('input', `input must be a string or an array of input items, got ${typeName(body.input)}.`);
  if (!messages.some((m) => m.role !== 'system')) return fail('input', 'input must be a non-empty string or a non-empty array of input items.');

  const req: ChatRequest = { messages };
  const echo: ResponsesEcho = {
    instructions,
    tools: [],
    tool_choice: 'auto',
    parallel_tool_calls: true,
    temperature: null,
    top_p: null,
    max_output_tokens: null,
    metadata: {},
    text: { format: { type: 'text' } },
    reasoning: { effort: null, summary: null },
  };
  const temperature = num(body, 'temperature', 0, 2);
  if (temperature !== undefined) req.temperature = echo.temperature = temperature;
  const topP = num(body, 'top_p', 0, 1);
  if (topP !== undefined) req.top_p = echo.top_p = topP;
  const maxOutput = int(body, 'max_output_tokens', 1);
  if (maxOutput !== undefined) req.max_completion_tokens = echo.max_output_tokens = maxOutput;
  if (!absent(body.tools)) {
    const t = tools(body.tools);
    if (t.defs.length > 0) req.tools = t.defs;
    echo.tools = t.echo;
  }
  if (!absent(body.tool_choice)) {
    const choice = toolChoice(body.tool_choice);
    if (req.tools) req.tool_choice = choice;
    else if (choice !== 'none' && choice !== 'auto') return fail('tool_choice', 'tool_choice needs tools.');
    echo.tool_choice = typeof choice === 'string' ? choice : { type: 'function', name: choice.function.name };
  }
  const parallel = bool(body, 'parallel_tool_calls');
  if (parallel !== undefined) {
    if (req.tools) req.parallel_tool_calls = parallel;
    echo.parallel_tool_calls = parallel;
  }
  if (!absent(body.text)) {
    const t = textFormat(body.text);
    if (t.format) req.response_format = t.format;
    echo.text = t.echo;
  }
  if (!absent(body.reasoning)) {
    const r = reasoning(body.reasoning);
    if (r.effort) req.reasoning_effort = r.effort;
    echo.reasoning = r.echo;
  }
  if (!absent(body.metadata)) echo.metadata = metadata(body.metadata);
  if (!absent(body.user)) req.user = echo.user = str(body.user, 'user', { max: 256 });
  const stream = bool(body, 'stream') ?? false;
  if (!absent(body.stream_options)) {
    const so = body.stream_options;
    if (!stream) return fail('stream_options', 'stream_options is only allowed when stream is true.');
    if (!isObject(so)) return fail('stream_options', 'stream_options must be an object.');
    onlyKeys(so, new Set(['include_obfuscation']), 'stream_options');
  }
  return { chat: { model, stream, includeUsage: false, request: req }, echo };
}

/** The Responses API's names for the chat fields a target can refuse, so a 400 names what the client sent. */
const PARAMS = new Map([
  ['messages', 'input'],
  ['response_format', 'text.format'],
  ['response_format.json_schema.schema', 'text.format.schema'],
  ['reasoning_effort', 'reasoning.effort'],
  ['max_completion_tokens', 'max_output_tokens'],
]);

export const responsesParam = (chatParam: string): string => PARAMS.get(chatParam) ?? chatParam;
