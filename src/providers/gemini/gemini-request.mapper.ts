import { assertUnreachable } from '../../common/errors/error-catalogue';
import type { ReasoningSpec } from '../../config/gateway-config';
import type {
  ChatMessage, ChatRequest, ContentPart, EmbeddingRequest, ReasoningEffort, StructuredOutputMode, ToolChoice, ToolDefinition,
} from '../provider-adapter';
import { SchemaInlineError } from '../json-schema/json-schema';
import { toResponseSchema } from './gemini-schema';
import { thoughtSignatureOf } from './gemini-tool-call-id';
import type {
  GeminiBatchEmbedContentsRequest, GeminiContent, GeminiEmbedContentRequest, GeminiFunctionDeclaration, GeminiGenerateContentRequest,
  GeminiGenerationConfig, GeminiPart, GeminiThinkingConfig,
} from './gemini.wire';

/** Thinking budgets for Gemini 2.5 when the model's config gives none (Google's OpenAI-compatibility table). */
export const DEFAULT_THINKING_BUDGETS = { low: 1024, medium: 8192, high: 24576 } as const;

/**
 * Google's documented bypass for a functionCall part that has no thought signature (a tool call the
 * client wrote itself, or one from another family). Sent as the literal string: its base64 encoding
 * is rejected (as LangChain's Google integration found).
 */
export const SKIP_THOUGHT_SIGNATURE = 'skip_thought_signature_validator';

/**
 * `reasoning_effort` → `thinkingConfig` by the model's configured reasoning mode (README
 * "reasoning_effort mapping"):
 * - `budget` (Gemini 2.5): `thinkingBudget` from the model's budgets, else 1024/8192/24576; `none` → 0
 *   when the model can turn thinking off, else no thinkingConfig (the model's default; 2.5 Pro
 *   rejects 0).
 * - `level` (Gemini 3): `thinkingLevel` low/medium/high; Gemini 3 cannot turn thinking off, so `none`
 *   → `low` (the smallest level every Gemini 3 model takes), or `minimal` when the config says the
 *   model can disable thinking (3 Flash's near-off level).
 * - `none`, `effort`, `adaptive` are not Gemini's knobs: the field is dropped.
 * Thought summaries are asked for (`includeThoughts`) whenever reasoning is on, and come back as
 * `reasoning` (never as content).
 */
export function thinkingConfigFor(effort: ReasoningEffort | undefined, reasoning: ReasoningSpec): GeminiThinkingConfig | undefined {
  if (effort === undefined) return undefined;
  switch (reasoning.mode) {
    case 'budget':
      if (effort === 'none') return reasoning.can_disable ? { thinkingBudget: 0 } : undefined;
      return { thinkingBudget: reasoning.budgets[effort] ?? DEFAULT_THINKING_BUDGETS[effort], includeThoughts: true };
    case 'level':
      if (effort === 'none') return { thinkingLevel: reasoning.can_disable ? 'minimal' : 'low' };
      return { thinkingLevel: effort, includeThoughts: true };
    case 'none':
    case 'effort':
    case 'adaptive':
      return undefined;
    default:
      return assertUnreachable(reasoning.mode);
  }
}

function textOf(content: ChatMessage['content']): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

/** `data:<mime>;base64,<data>` → inlineData; any other URL → fileData with a MIME type guessed from the extension. */
function imagePart(url: string): GeminiPart {
  const m = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(url);
  if (m) return { inlineData: { mimeType: m[1], data: m[2] } };
  const ext = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(url)?.[1]?.toLowerCase();
  const mimeType = ext === 'png' ? 'image/png' : ext === 'webp' ? 'image/webp' : ext === 'gif' ? 'image/gif' : ext === 'heic' ? 'image/heic' : 'image/jpeg';
  return { fileData: { mimeType, fileUri: url } };
}

function userParts(content: ChatMessage['content']): GeminiPart[] {
  if (content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }];
  return content.map((p: ContentPart) => (p.type === 'text' ? { text: p.text } : imagePart(p.image_url.url)));
}

function parseArgs(args: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args || '{}');
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : { value: v };
  } catch {
    // Gemini needs an object; a client that sent broken JSON gets its text kept rather than dropped.
    return { raw: args };
  }
}

/** A tool result must be a JSON object for Gemini: an object is sent as is, anything else wrapped as `{content}`. */
function functionResponseBody(content: ChatMessage['content']): Record<string, unknown> {
  const text = textOf(content);
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // not JSON: wrapped below
  }
  return { content: text };
}

/**
 * Messages → `systemInstruction` + `contents`: system and developer
 * messages, wherever they are, become systemInstruction parts in order; user/tool → role `user`,
 * assistant → role `model`; consecutive turns of one role are merged (Gemini wants alternation, and
 * all responses to one step's calls in one turn). A tool message's function name comes from the
 * earlier tool call with its id.
 */
export function toContents(
  messages: ChatMessage[],
  opts: { dummySignatures: boolean },
): { contents: GeminiContent[]; systemInstruction?: { parts: GeminiPart[] } } {
  const system: GeminiPart[] = [];
  const contents: GeminiContent[] = [];
  const callNames = new Map<string, string>();
  const push = (role: 'user' | 'model', parts: GeminiPart[]) => {
    if (parts.length === 0) return;
    const last = contents[contents.length - 1];
    if (last?.role === role) last.parts!.push(...parts);
    else contents.push({ role, parts });
  };
  for (const m of messages) {
    switch (m.role) {
      case 'system':
      case 'developer': {
        const text = textOf(m.content);
        if (text) system.push({ text });
        break;
      }
      case 'user':
        push('user', userParts(m.content));
        break;
      case 'assistant': {
        const parts: GeminiPart[] = [];
        const text = textOf(m.content);
        if (text) parts.push({ text });
        (m.tool_calls ?? []).forEach((tc, i) => {
          callNames.set(tc.id, tc.function.name);
          const part: GeminiPart = { functionCall: { name: tc.function.name, args: parseArgs(tc.function.arguments) } };
          // Gemini 3 checks the signature on the first call of a step only; later parallel calls carry none.
          const signature = thoughtSignatureOf(tc.id) ?? (opts.dummySignatures && i === 0 ? SKIP_THOUGHT_SIGNATURE : undefined);
          if (signature) part.thoughtSignature = signature;
          parts.push(part);
        });
        push('model', parts);
        break;
      }
      case 'tool': {
        const name = (m.tool_call_id && callNames.get(m.tool_call_id)) || m.name || 'unknown_function';
        push('user', [{ functionResponse: { name, response: functionResponseBody(m.content) } }]);
        break;
      }
      default:
        assertUnreachable(m.role);
    }
  }
  return system.length ? { contents, systemInstruction: { parts: system } } : { contents };
}

/** JSON-Schema keywords Gemini's `Schema` (an OpenAPI 3.0 subset) accepts; others are refused with a 400. */
const SCHEMA_KEYS = new Set([
  'type', 'format', 'title', 'description', 'nullable', 'enum', 'maxItems', 'minItems', 'properties', 'required', 'minProperties',
  'maxProperties', 'minLength', 'maxLength', 'pattern', 'example', 'anyOf', 'propertyOrdering', 'default', 'items', 'minimum', 'maximum',
]);

/** Strips keywords Gemini does not know (`additionalProperties`, `$schema`, `strict`, …) and turns `type: [T, "null"]` into `nullable`. */
export function toGeminiSchema(schema: unknown): unknown {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema as Record<string, unknown>)) {
    if (!SCHEMA_KEYS.has(k)) continue;
    if (k === 'properties' && v && typeof v === 'object') {
      out[k] = Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([name, s]) => [name, toGeminiSchema(s)]));
    } else if (k === 'items') out[k] = toGeminiSchema(v);
    else if (k === 'anyOf' && Array.isArray(v)) out[k] = v.map(toGeminiSchema);
    else if (k === 'type' && Array.isArray(v)) {
      const types = v.filter((t) => t !== 'null');
      out.type = types[0];
      if (types.length < v.length) out.nullable = true;
    } else out[k] = v;
  }
  return out;
}

/**
 * A tool's parameters as a Gemini `Schema`: the same conversion as a structured-output schema, so
 * `$defs`/`$ref` are inlined rather than dropped. A schema that cannot be inlined (a recursive one)
 * keeps the plain keyword filter: its references are dropped, as Gemini has no way to express them.
 */
function geminiParameters(schema: Record<string, unknown>): Record<string, unknown> {
  try {
    return toResponseSchema(schema) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof SchemaInlineError) return toGeminiSchema(schema) as Record<string, unknown>;
    throw err;
  }
}

export function toFunctionDeclarations(tools: ToolDefinition[]): GeminiFunctionDeclaration[] {
  return tools.map((t) => {
    const d: GeminiFunctionDeclaration = { name: t.function.name };
    if (t.function.description) d.description = t.function.description;
    const params = t.function.parameters ? geminiParameters(t.function.parameters) : undefined;
    // An object schema without properties is refused ("properties: should be non-empty for OBJECT type"): a no-argument function sends none.
    const props = params?.properties as Record<string, unknown> | undefined;
    if (params && !(params.type === 'object' && (!props || Object.keys(props).length === 0))) d.parameters = params;
    return d;
  });
}

export function toToolConfig(choice: ToolChoice): GeminiGenerateContentRequest['toolConfig'] {
  if (choice === 'none') return { functionCallingConfig: { mode: 'NONE' } };
  if (choice === 'auto') return { functionCallingConfig: { mode: 'AUTO' } };
  if (choice === 'required') return { functionCallingConfig: { mode: 'ANY' } };
  return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [choice.function.name] } };
}

/**
 * `structured_output` of a Gemini model without one in its config: the converted `responseSchema`,
 * which every Gemini model takes; `responseJsonSchema` (the schema as it is, `$ref`s and all) is
 * opted into per model with `native`.
 */
export const DEFAULT_STRUCTURED_OUTPUT: StructuredOutputMode = 'converted_schema';

/**
 * The normalised request → a generateContent body. `systemInstruction`, `tools` and `toolConfig` sit
 * at the top level, everything else inside `generationConfig` (a misplaced field is silently
 * ignored). `user` and `parallel_tool_calls` have no Gemini equivalent and are dropped.
 * `response_format: json_schema` is `responseMimeType: application/json` with the schema as the
 * model's `structured_output` says: `responseJsonSchema` (native) or the converted `responseSchema`.
 */
export function toGenerateContentRequest(
  req: ChatRequest,
  reasoning: ReasoningSpec,
  structuredOutput: StructuredOutputMode = DEFAULT_STRUCTURED_OUTPUT,
): GeminiGenerateContentRequest {
  const body: GeminiGenerateContentRequest = toContents(req.messages, { dummySignatures: reasoning.mode === 'level' });
  if (req.tools?.length) body.tools = [{ functionDeclarations: toFunctionDeclarations(req.tools) }];
  if (req.tool_choice !== undefined) body.toolConfig = toToolConfig(req.tool_choice);

  const g: GeminiGenerationConfig = {};
  if (req.temperature !== undefined) g.temperature = req.temperature;
  if (req.top_p !== undefined) g.topP = req.top_p;
  if (req.max_completion_tokens !== undefined) g.maxOutputTokens = req.max_completion_tokens;
  if (req.stop?.length) g.stopSequences = req.stop;
  if (req.n !== undefined) g.candidateCount = req.n;
  if (req.seed !== undefined) g.seed = req.seed;
  if (req.presence_penalty !== undefined) g.presencePenalty = req.presence_penalty;
  if (req.frequency_penalty !== undefined) g.frequencyPenalty = req.frequency_penalty;
  const rf = req.response_format;
  if (rf?.type === 'json_object') g.responseMimeType = 'application/json';
  if (rf?.type === 'json_schema') {
    g.responseMimeType = 'application/json';
    if (structuredOutput === 'native') g.responseJsonSchema = rf.json_schema.schema;
    else g.responseSchema = toResponseSchema(rf.json_schema.schema);
  }
  const thinking = thinkingConfigFor(req.reasoning_effort, reasoning);
  if (thinking) g.thinkingConfig = thinking;
  if (Object.keys(g).length) body.generationConfig = g;
  return body;
}

/** `models/<name>`, the resource name batchEmbedContents repeats per request. */
export function modelResource(upstream: string): string {
  return upstream.startsWith('models/') ? upstream : `models/${upstream}`;
}

/**
 * The most requests Google takes in one batchEmbedContents: one more is a 400 INVALID_ARGUMENT
 * "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch" (not in
 * Google's docs; reported by LangChain.js, Vercel AI SDK and Weaviate users).
 */
export const MAX_EMBED_BATCH = 100;

/** Consecutive slices of at most `size` inputs, in input order, for one batchEmbedContents each. */
export function embedBatches(input: string[], size = MAX_EMBED_BATCH): string[][] {
  const batches: string[][] = [];
  for (let i = 0; i < input.length; i += size) batches.push(input.slice(i, i + size));
  return batches;
}

export function toEmbedContentRequest(text: string, dimensions: number | undefined): GeminiEmbedContentRequest {
  return { content: { parts: [{ text }] }, ...(dimensions !== undefined ? { outputDimensionality: dimensions } : {}) };
}

export function toBatchEmbedContentsRequest(req: EmbeddingRequest, upstream: string, dimensions: number | undefined): GeminiBatchEmbedContentsRequest {
  const model = modelResource(upstream);
  return { requests: req.input.map((text) => ({ model, ...toEmbedContentRequest(text, dimensions) })) };
}
