import type { ModelSpec } from '../../config/gateway-config';
import type {
  ChatMessage, ChatRequest, ContentPart, JsonSchemaFormat, ReasoningEffort, StructuredOutputMode, ToolCall, ToolChoice, UpstreamTarget,
} from '../provider-adapter';
import type {
  WireImageBlock, WireMessage, WireRequest, WireRequestBlock, WireRole, WireThinking, WireToolChoice, WireToolResultBlock,
} from './anthropic.wire';

/** `max_tokens` when neither the request nor the model config gives one (LiteLLM's default). */
export const DEFAULT_MAX_TOKENS = 4096;

/** Anthropic refuses a thinking budget below this. */
export const MIN_THINKING_BUDGET = 1024;

/**
 * Thinking budgets for `reasoning.mode: budget` when the model config gives none (README
 * "reasoning_effort mapping"): low is Anthropic's minimum; medium and high sit inside the ranges
 * other gateways use, leaving room for an answer under the 4096 default output allowance.
 */
export const DEFAULT_THINKING_BUDGETS: Readonly<Record<Exclude<ReasoningEffort, 'none'>, number>> = { low: 1024, medium: 4096, high: 16384 };

/** Anthropic's temperature range is 0..1; OpenAI's 0..2 is clamped onto it, not scaled. */
export const MAX_TEMPERATURE = 1;

/**
 * `structured_output` of an Anthropic model without one in its config: the forced tool works on every
 * Claude model that takes tools; native `output_config.format` only on the newer ones, so it is opted
 * into per model.
 */
export const DEFAULT_STRUCTURED_OUTPUT: StructuredOutputMode = 'forced_tool';

/** How one request's `response_format: json_schema` reaches Anthropic; `tool` is the forced tool's name. */
export type StructuredPlan =
  | { mode: 'native'; format: JsonSchemaFormat }
  | { mode: 'forced_tool'; format: JsonSchemaFormat; tool: string; wrapped: boolean };

/**
 * A tool's `input_schema` must be an object schema, so any other answer schema (an array, a string,
 * a union) is wrapped as the one required property `value`; the response mappers unwrap it. Root
 * `$defs`/`definitions` stay at the root, where the schema's `#/$defs/…` refs point.
 */
export function responseToolSchema(schema: Record<string, unknown>): { input_schema: Record<string, unknown>; wrapped: boolean } {
  if (schema.type === 'object') return { input_schema: schema, wrapped: false };
  const { $defs, definitions, $schema: _s, ...value } = schema;
  return {
    input_schema: { type: 'object', properties: { value }, required: ['value'], ...($defs ? { $defs } : {}), ...(definitions ? { definitions } : {}) },
    wrapped: true,
  };
}

/**
 * The structured-output path of this request on this target, or undefined when it asks for none.
 * The forced tool is named after the schema, so the model reads what it is filling in; a client tool
 * of the same name gets `_response` appended to ours instead.
 */
export function structuredPlan(req: ChatRequest, target: UpstreamTarget): StructuredPlan | undefined {
  const rf = req.response_format;
  if (rf?.type !== 'json_schema') return undefined;
  const mode = target.structuredOutput ?? DEFAULT_STRUCTURED_OUTPUT;
  if (mode === 'native') return { mode, format: rf.json_schema };
  if (mode !== 'forced_tool') return undefined;
  const names = new Set((req.tools ?? []).map((t) => t.function.name));
  const name = rf.json_schema.name;
  const tool = names.has(name) ? `${name.slice(0, 55)}_response` : name;
  return { mode, format: rf.json_schema, tool, wrapped: responseToolSchema(rf.json_schema.schema).wrapped };
}

/**
 * `tool_choice` with the forced response tool: that tool alone when the client has no tools (or
 * said `none` to them); `any` when the client's tools may still be called (the model then answers
 * either through one of them or through ours, never in free text); a client's named tool is kept.
 */
function forcedToolChoice(plan: Extract<StructuredPlan, { mode: 'forced_tool' }>, req: ChatRequest): WireToolChoice {
  const noParallel = req.parallel_tool_calls === false ? { disable_parallel_tool_use: true } : {};
  const choice = req.tool_choice;
  if (!req.tools?.length || choice === 'none') return { type: 'tool', name: plan.tool };
  if (typeof choice === 'object') return { type: 'tool', name: choice.function.name, ...noParallel };
  return { type: 'any', ...noParallel };
}

type ThinkingPlan = { thinking: WireThinking; effort?: Exclude<ReasoningEffort, 'none'>; budget?: number } | undefined;

/**
 * Builds the Messages API body from the normalised request:
 * - system/developer messages are hoisted into the top-level `system`, joined by a blank line;
 * - tool results become user `tool_result` blocks, assistant tool calls `tool_use` blocks, and
 *   consecutive same-role messages are merged so user/assistant alternate;
 * - `max_tokens` is always sent: the request's, else the model's `max_output_tokens`, else 4096;
 * - `reasoning_effort` follows the model's `reasoning` config (see `planThinking`);
 * - `response_format: json_schema` goes out as the model's `structured_output` says (see
 *   `structuredPlan`): `output_config.format`, or a forced tool whose input is the answer (the
 *   response mappers unwrap it into `content`); with the forced tool, thinking is left off;
 * - fields Anthropic has no equivalent for (penalties, seed, n, json_object) are not sent: the
 *   adapter's capabilities declare seed, n > 1 and JSON mode unsupported so the chat layer decides.
 */
export function toMessagesRequest(req: ChatRequest, target: UpstreamTarget, stream: boolean): WireRequest {
  const allowance = req.max_completion_tokens ?? target.model.max_output_tokens ?? DEFAULT_MAX_TOKENS;
  const body: WireRequest = { model: target.upstream, max_tokens: allowance, messages: toWireMessages(req.messages) };

  const system = systemText(req.messages);
  if (system) body.system = system;

  const tools = req.tools ?? [];
  if (tools.length > 0) {
    body.tools = tools.map((t) => ({
      name: t.function.name,
      ...(t.function.description ? { description: t.function.description } : {}),
      input_schema: t.function.parameters ?? { type: 'object', properties: {} },
    }));
    const choice = toToolChoice(req.tool_choice, req.parallel_tool_calls);
    if (choice) body.tool_choice = choice;
  }

  const structured = structuredPlan(req, target);
  if (structured?.mode === 'native') body.output_config = { format: { type: 'json_schema', schema: structured.format.schema } };
  if (structured?.mode === 'forced_tool') {
    const f = structured.format;
    body.tools = [
      ...(body.tools ?? []),
      { name: structured.tool, description: f.description ?? `Answer with the ${f.name} object. Its input is the whole answer.`, input_schema: responseToolSchema(f.schema).input_schema },
    ];
    body.tool_choice = forcedToolChoice(structured, req);
  }

  const stops = (req.stop ?? []).filter((s) => s.trim() !== '');
  if (stops.length > 0) body.stop_sequences = stops;
  if (req.user) body.metadata = { user_id: req.user };
  if (stream) body.stream = true;

  // Anthropic refuses forced tool use while thinking, so the forced response tool wins: no thinking.
  const plan = structured?.mode === 'forced_tool' ? undefined : planThinking(req, target.model);
  if (plan) {
    body.thinking = plan.thinking;
    if (plan.thinking.type === 'adaptive' && plan.effort) body.output_config = { ...body.output_config, effort: plan.effort };
    // budget_tokens must stay below max_tokens; the client's allowance is kept for the answer itself.
    if (plan.budget !== undefined && body.max_tokens <= plan.budget) body.max_tokens = plan.budget + allowance;
  } else {
    // With thinking on Anthropic accepts only temperature 1 and top_p >= 0.95: both are dropped then.
    if (req.temperature !== undefined) body.temperature = Math.min(Math.max(req.temperature, 0), MAX_TEMPERATURE);
    if (req.top_p !== undefined) body.top_p = req.top_p;
  }
  return body;
}

/**
 * How `reasoning_effort` reaches Anthropic, by the model's `reasoning.mode` (README
 * "reasoning_effort mapping"):
 * - `budget`   → `thinking: {type: enabled, budget_tokens}` from `reasoning.budgets`, else
 *                DEFAULT_THINKING_BUDGETS, never below 1024;
 * - `adaptive` → `thinking: {type: adaptive, display: summarized}` + `output_config.effort`;
 * - `none`, `effort`, `level` → nothing (the model cannot take it; no upstream 400);
 * - effort `none` → no `thinking` at all: omitting it is Anthropic's off switch on every model. A
 *   model configured `can_disable: false` gets its lowest setting (`low`) instead.
 * Thinking is also left off when the request forces a tool (Anthropic refuses forced tool use with
 * thinking) or continues a tool loop: the assistant turn would have to start with its signed
 * thinking block, which the OpenAI message shape cannot carry back.
 */
export function planThinking(req: ChatRequest, model: ModelSpec): ThinkingPlan {
  let effort = req.reasoning_effort;
  if (effort === undefined) return undefined;
  if (effort === 'none') {
    if (model.reasoning.can_disable) return undefined;
    effort = 'low';
  }
  const mode = model.reasoning.mode;
  if (mode !== 'budget' && mode !== 'adaptive') return undefined;
  if (forcesTool(req.tool_choice) || continuesToolLoop(req.messages)) return undefined;
  if (mode === 'adaptive') return { thinking: { type: 'adaptive', display: 'summarized' }, effort };
  const budget = Math.max(model.reasoning.budgets[effort] ?? DEFAULT_THINKING_BUDGETS[effort], MIN_THINKING_BUDGET);
  return { thinking: { type: 'enabled', budget_tokens: budget }, effort, budget };
}

function forcesTool(choice: ToolChoice | undefined): boolean {
  return choice === 'required' || (typeof choice === 'object' && choice !== null);
}

/** The conversation ends in tool results answering the last assistant turn's tool calls. */
function continuesToolLoop(messages: ChatMessage[]): boolean {
  const turns = messages.filter((m) => m.role !== 'system' && m.role !== 'developer');
  const last = turns[turns.length - 1];
  if (last?.role !== 'tool') return false;
  const assistant = [...turns].reverse().find((m) => m.role !== 'tool');
  return assistant?.role === 'assistant' && (assistant.tool_calls?.length ?? 0) > 0;
}

export function toToolChoice(choice: ToolChoice | undefined, parallel: boolean | undefined): WireToolChoice | undefined {
  const noParallel = parallel === false ? { disable_parallel_tool_use: true } : {};
  if (choice === undefined) return parallel === false ? { type: 'auto', ...noParallel } : undefined;
  if (choice === 'none') return { type: 'none' };
  if (choice === 'auto') return { type: 'auto', ...noParallel };
  if (choice === 'required') return { type: 'any', ...noParallel };
  return { type: 'tool', name: choice.function.name, ...noParallel };
}

function textOf(content: ChatMessage['content']): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content
    .filter((p): p is Extract<ContentPart, { type: 'text' }> => p.type === 'text')
    .map((p) => p.text)
    .join('\n');
}

function systemText(messages: ChatMessage[]): string {
  return messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => textOf(m.content))
    .filter((t) => t.trim() !== '')
    .join('\n\n');
}

/** `data:<media>;base64,<data>` → a base64 source; anything else is fetched by Anthropic as a URL source. */
export function toImageBlock(url: string): WireImageBlock {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (m) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } };
  return { type: 'image', source: { type: 'url', url } };
}

/** Anthropic needs an object for `input`; a model's own malformed arguments become `{}` rather than a 400. */
function parseArguments(args: string): Record<string, unknown> {
  if (args.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(args);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function contentBlocks(content: ChatMessage['content']): WireRequestBlock[] {
  if (content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  const blocks: WireRequestBlock[] = [];
  for (const p of content) {
    if (p.type === 'text') {
      if (p.text !== '') blocks.push({ type: 'text', text: p.text });
    } else blocks.push(toImageBlock(p.image_url.url));
  }
  return blocks;
}

function toolUseBlocks(calls: ToolCall[] | undefined): WireRequestBlock[] {
  return (calls ?? []).map((c) => ({ type: 'tool_use', id: c.id, name: c.function.name, input: parseArguments(c.function.arguments) }));
}

function toolResultBlock(m: ChatMessage): WireToolResultBlock {
  const text = textOf(m.content);
  return { type: 'tool_result', tool_use_id: m.tool_call_id ?? '', content: text };
}

/**
 * Non-system messages as alternating user/assistant turns. Empty text blocks (which Anthropic
 * refuses) are dropped, and so is a message left with no blocks. In a merged user turn the
 * `tool_result` blocks come first, as Anthropic requires after a `tool_use` turn.
 */
export function toWireMessages(messages: ChatMessage[]): WireMessage[] {
  const turns: { role: WireRole; blocks: WireRequestBlock[]; plain?: string }[] = [];
  for (const m of messages) {
    let role: WireRole;
    let blocks: WireRequestBlock[];
    if (m.role === 'system' || m.role === 'developer') continue;
    if (m.role === 'tool') {
      role = 'user';
      blocks = [toolResultBlock(m)];
    } else if (m.role === 'assistant') {
      role = 'assistant';
      blocks = [...contentBlocks(m.content), ...toolUseBlocks(m.tool_calls)];
    } else {
      role = 'user';
      blocks = contentBlocks(m.content);
    }
    if (blocks.length === 0) continue;
    const prev = turns[turns.length - 1];
    if (prev && prev.role === role) {
      prev.blocks.push(...blocks);
      prev.plain = undefined;
    } else turns.push({ role, blocks, plain: typeof m.content === 'string' && m.role !== 'tool' && !m.tool_calls?.length ? m.content : undefined });
  }
  return turns.map((t) => {
    if (t.plain !== undefined) return { role: t.role, content: t.plain };
    const results = t.blocks.filter((b) => b.type === 'tool_result');
    const rest = t.blocks.filter((b) => b.type !== 'tool_result');
    return { role: t.role, content: [...results, ...rest] };
  });
}
