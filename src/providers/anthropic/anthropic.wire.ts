/**
 * Anthropic Messages API wire shapes. Only this folder imports them: the
 * rest of the gateway sees the normalised ChatRequest / ChatResult / StreamEvent.
 */

export type WireRole = 'user' | 'assistant';

export interface WireTextBlock {
  type: 'text';
  text: string;
}

export interface WireImageBlock {
  type: 'image';
  source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
}

export interface WireToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
}

export interface WireToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string | WireTextBlock[];
  is_error?: boolean;
}

export interface WireThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface WireRedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

export type WireRequestBlock = WireTextBlock | WireImageBlock | WireToolUseBlock | WireToolResultBlock;

export interface WireMessage {
  role: WireRole;
  content: string | WireRequestBlock[];
}

export interface WireTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
}

export type WireToolChoice =
  | { type: 'auto' | 'any'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean }
  | { type: 'none' };

export type WireThinking = { type: 'enabled'; budget_tokens: number } | { type: 'adaptive'; display?: 'summarized' | 'omitted' } | { type: 'disabled' };

export type WireEffort = 'low' | 'medium' | 'high' | 'xhigh' | 'max';

export interface WireRequest {
  model: string;
  max_tokens: number;
  messages: WireMessage[];
  system?: string;
  temperature?: number;
  top_p?: number;
  stop_sequences?: string[];
  stream?: boolean;
  tools?: WireTool[];
  tool_choice?: WireToolChoice;
  metadata?: { user_id: string };
  thinking?: WireThinking;
  output_config?: { effort?: WireEffort; format?: WireOutputFormat };
}

/** Native structured output (`output_config.format`). */
export interface WireOutputFormat {
  type: 'json_schema';
  schema: Record<string, unknown>;
}

export type WireStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal' | 'model_context_window_exceeded';

export interface WireUsage {
  input_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  output_tokens?: number;
  /** 2026+ responses; older ones lack it. */
  output_tokens_details?: { thinking_tokens?: number | null } | null;
  service_tier?: string | null;
}

/** Response content blocks; server-tool blocks and anything newer arrive as `{type: string}` and are ignored. */
export type WireResponseBlock =
  | WireTextBlock
  | WireThinkingBlock
  | WireRedactedThinkingBlock
  | WireToolUseBlock
  | { type: string; [key: string]: unknown };

export interface WireResponse {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: WireResponseBlock[];
  stop_reason: WireStopReason | string | null;
  stop_sequence?: string | null;
  usage?: WireUsage | null;
}

export interface WireErrorBody {
  type: 'error';
  error: { type: string; message: string };
  request_id?: string;
}

export type WireDelta =
  | { type: 'text_delta'; text: string }
  | { type: 'thinking_delta'; thinking: string }
  | { type: 'signature_delta'; signature: string }
  | { type: 'input_json_delta'; partial_json: string }
  | { type: 'citations_delta'; citation: unknown }
  | { type: string; [key: string]: unknown };

/** One SSE event's `data` (its `type` equals the `event:` name). */
export type WireStreamEvent =
  | { type: 'message_start'; message: WireResponse }
  | { type: 'content_block_start'; index: number; content_block: WireResponseBlock }
  | { type: 'content_block_delta'; index: number; delta: WireDelta }
  | { type: 'content_block_stop'; index: number }
  | { type: 'message_delta'; delta: { stop_reason?: WireStopReason | string | null; stop_sequence?: string | null }; usage?: WireUsage | null }
  | { type: 'message_stop' }
  | { type: 'ping' }
  | { type: 'error'; error: { type: string; message: string } };
