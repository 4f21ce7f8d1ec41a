/**
 * Pure mapping from the gateway's normalised request to the OpenAI-compatible wire format (chat and
 * embeddings), parameterised by the family's declared variant (variants.ts).
 *
 * reasoning_effort (contract: none|low|medium|high), by the catalogue model's `reasoning.mode`
 * (README "reasoning_effort mapping"):
 *
 *   model mode                 | low / medium / high               | none
 *   ---------------------------+-----------------------------------+----------------------------------
 *   none                       | field dropped                     | field dropped
 *   effort                     | sent as-is: `reasoning_effort`    | sent as `none` only when
 *                              | (OpenRouter: `reasoning.effort`)  | `reasoning.can_disable`, else dropped
 *   budget / level / adaptive  | field dropped (Anthropic/Gemini   | field dropped
 *                              | modes, not for this family)       |
 *
 * A model that cannot take the field gets no field rather than an upstream 400; omitting it keeps
 * the model's default.
 */
import { createHash } from 'node:crypto';
import type { ReasoningSpec } from '../../config/gateway-config';
import type { ChatMessage, ChatRequest, EmbeddingRequest, ReasoningEffort, ToolChoice, UpstreamTarget } from '../provider-adapter';
import type { OpenAiVariant } from './variants';
import type { WireChatRequest, WireEmbeddingRequest, WireMessage, WireToolChoice } from './openai.wire';

export interface WireRequestOptions {
  stream: boolean;
  /** False on Azure deployment URLs, where the path names the model. */
  modelInBody: boolean;
}

export function reasoningFor(effort: ReasoningEffort | undefined, spec: ReasoningSpec, variant: OpenAiVariant): Pick<WireChatRequest, 'reasoning_effort' | 'reasoning'> {
  if (effort === undefined || spec.mode !== 'effort') return {};
  if (effort === 'none' && !spec.can_disable) return {};
  return variant.reasoningParam === 'reasoning.effort' ? { reasoning: { effort } } : { reasoning_effort: effort };
}

/** A deterministic 9-character letters-and-digits id, for families that refuse other tool-call ids. */
export function alnum9(id: string): string {
  if (/^[A-Za-z0-9]{9}$/.test(id)) return id;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const digest = createHash('sha256').update(id).digest();
  let out = '';
  for (let i = 0; i < 9; i++) out += alphabet[digest[i] % alphabet.length];
  return out;
}

function toWireMessage(m: ChatMessage, variant: OpenAiVariant): WireMessage {
  const toolId = variant.toolCallIds === 'alnum9' ? alnum9 : (id: string) => id;
  const out: WireMessage = {
    role: m.role === 'developer' && !variant.developerRole ? 'system' : m.role,
    content: m.content,
  };
  if (m.name !== undefined) out.name = m.name;
  if (m.tool_calls) out.tool_calls = m.tool_calls.map((t) => ({ id: toolId(t.id), type: 'function', function: { ...t.function } }));
  if (m.tool_call_id !== undefined) out.tool_call_id = toolId(m.tool_call_id);
  return out;
}

function toWireToolChoice(choice: ToolChoice, variant: OpenAiVariant): WireToolChoice {
  return choice === 'required' ? variant.toolChoiceRequired : choice;
}

export function toWireRequest(req: ChatRequest, target: UpstreamTarget, variant: OpenAiVariant, opts: WireRequestOptions): WireChatRequest {
  const caps = variant.capabilities;
  const body: WireChatRequest = { messages: req.messages.map((m) => toWireMessage(m, variant)) };
  if (opts.modelInBody) body.model = target.upstream;
  if (opts.stream) {
    body.stream = true;
    // Always ask for usage where the family takes the option; the gateway decides what to forward.
    if (variant.streamUsageOption) body.stream_options = { include_usage: true };
  }
  if (req.max_completion_tokens !== undefined) body[variant.tokenLimitParam] = req.max_completion_tokens;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.top_p !== undefined) body.top_p = req.top_p;
  if (req.frequency_penalty !== undefined) body.frequency_penalty = req.frequency_penalty;
  if (req.presence_penalty !== undefined) body.presence_penalty = req.presence_penalty;
  if (req.stop !== undefined) body.stop = req.stop;
  if (req.seed !== undefined && caps.seed) body[variant.seedParam] = req.seed;
  // `n` is 1 by default; families without multiple choices refuse any explicit value (Groq).
  if (req.n !== undefined && caps.multipleChoices) body.n = req.n;
  if (req.user !== undefined) body.user = req.user;
  if (req.response_format !== undefined) body.response_format = req.response_format;
  if (req.tools !== undefined) body.tools = req.tools;
  if (req.tool_choice !== undefined) body.tool_choice = toWireToolChoice(req.tool_choice, variant);
  if (req.parallel_tool_calls !== undefined) body.parallel_tool_calls = req.parallel_tool_calls;
  Object.assign(body, reasoningFor(req.reasoning_effort, target.model.reasoning, variant));
  return body;
}

export function toWireEmbeddingRequest(req: EmbeddingRequest, target: UpstreamTarget, opts: { modelInBody: boolean }): WireEmbeddingRequest {
  // Always float upstream: the gateway encodes base64 for clients itself.
  const body: WireEmbeddingRequest = { input: req.input, encoding_format: 'float' };
  if (opts.modelInBody) body.model = target.upstream;
  if (req.dimensions !== undefined) body.dimensions = req.dimensions;
  if (req.user !== undefined) body.user = req.user;
  return body;
}
