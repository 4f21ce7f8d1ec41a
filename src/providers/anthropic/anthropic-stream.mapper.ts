import type { StreamEvent, Usage } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { streamError, toFinishReason, toUsage } from './anthropic-response.mapper';
import type { WireStreamEvent, WireUsage } from './anthropic.wire';

/**
 * Translates one Messages stream into StreamEvents. Per stream state:
 * the usage seen so far (input from `message_start`, cumulative output from `message_delta`), the
 * stop reason, and which content block is which. Tool calls are numbered among tool_use blocks only
 * (k), not by Anthropic's block index, which also counts text and thinking blocks.
 *
 * `responseTool` names the forced tool carrying a `response_format: json_schema` answer: its
 * `input_json_delta` fragments are the answer's JSON text, sent as content (`{}` when the input came
 * whole and empty), never as a tool call, and its `tool_use` stop finishes with `stop`. When the
 * answer schema was wrapped (`wrapped`: the input is `{value: answer}`), the fragments are held and
 * the answer is sent whole at the block's end.
 *
 * `finish` and `usage` are emitted at `message_stop`, the end marker; `end()` throws a protocol error
 * if the body ended before it. `ping`, `signature_delta`, `citations_delta` and unknown event or block
 * types yield nothing; an `error` event throws.
 */
export class AnthropicStreamMapper {
  private usage: WireUsage | undefined;
  private stopReason: string | null | undefined;
  private readonly blocks = new Map<number, { type: string; tool?: number; answered?: boolean; held?: string }>();
  private tools = 0;
  private started = false;
  private stopped = false;

  constructor(
    private readonly responseTool?: string,
    private readonly wrapped = false,
  ) {}

  get done(): boolean {
    return this.stopped;
  }

  push(ev: WireStreamEvent): StreamEvent[] {
    if (this.stopped) return [];
    switch (ev.type) {
      case 'message_start':
        this.started = true;
        this.mergeUsage(ev.message?.usage);
        return [];
      case 'content_block_start':
        return this.blockStart(ev.index, ev.content_block as { type: string; [k: string]: unknown });
      case 'content_block_delta':
        return this.blockDelta(ev.index, ev.delta);
      case 'content_block_stop': {
        const block = this.blocks.get(ev.index);
        // A response tool whose input came in content_block_start only ({} streams no fragments).
        if (block?.type === 'response' && this.wrapped) {
          let input: { value?: unknown };
          try {
            input = JSON.parse(block.held || '{}') as { value?: unknown };
          } catch {
            throw new UpstreamError('protocol', 'anthropic stream: the response tool input is not JSON');
          }
          return [{ type: 'delta', index: 0, content: JSON.stringify(input?.value ?? null) }];
        }
        if (block?.type === 'response' && !block.answered) {
          block.answered = true;
          return [{ type: 'delta', index: 0, content: '{}' }];
        }
        return [];
      }
      case 'message_delta':
        this.requireStarted(ev.type);
        if (ev.delta?.stop_reason) this.stopReason = ev.delta.stop_reason;
        this.mergeUsage(ev.usage);
        return [];
      case 'message_stop': {
        this.requireStarted(ev.type);
        this.stopped = true;
        let finish = toFinishReason(this.stopReason);
        if (finish === 'tool_calls' && this.tools === 0) finish = 'stop';
        const out: StreamEvent[] = [{ type: 'finish', index: 0, finish_reason: finish }];
        const usage = this.finalUsage();
        if (usage) out.push({ type: 'usage', usage });
        return out;
      }
      case 'ping':
        return [];
      case 'error':
        throw streamError(ev.error);
      default:
        return [];
    }
  }

  /** Called when the body ends: a stream without `message_stop` was cut short. */
  end(): void {
    if (!this.stopped) throw new UpstreamError('protocol', 'anthropic stream ended before message_stop');
  }

  private requireStarted(type: string): void {
    if (!this.started) throw new UpstreamError('protocol', `anthropic stream: ${type} before message_start`);
  }

  private blockStart(index: number, block: { type: string; [k: string]: unknown }): StreamEvent[] {
    this.requireStarted('content_block_start');
    if (block?.type === 'tool_use' && this.responseTool !== undefined && block.name === this.responseTool && ![...this.blocks.values()].some((b) => b.type === 'response')) {
      this.blocks.set(index, { type: 'response' });
      return [];
    }
    if (block?.type === 'tool_use') {
      const k = this.tools++;
      this.blocks.set(index, { type: block.type, tool: k });
      return [{ type: 'delta', index: 0, tool_calls: [{ index: k, id: String(block.id), type: 'function', function: { name: String(block.name), arguments: '' } }] }];
    }
    this.blocks.set(index, { type: block?.type ?? 'unknown' });
    if (block?.type === 'text' && typeof block.text === 'string' && block.text !== '') return [{ type: 'delta', index: 0, content: block.text }];
    if (block?.type === 'thinking' && typeof block.thinking === 'string' && block.thinking !== '') return [{ type: 'delta', index: 0, reasoning: block.thinking }];
    return [];
  }

  private blockDelta(index: number, delta: { type: string; [k: string]: unknown }): StreamEvent[] {
    const block = this.blocks.get(index);
    if (!block) throw new UpstreamError('protocol', `anthropic stream: delta for unknown content block ${index}`);
    switch (delta?.type) {
      case 'text_delta':
        return delta.text ? [{ type: 'delta', index: 0, content: String(delta.text) }] : [];
      case 'thinking_delta':
        return delta.thinking ? [{ type: 'delta', index: 0, reasoning: String(delta.thinking) }] : [];
      case 'input_json_delta':
        if (block.type === 'response') {
          if (!delta.partial_json) return [];
          if (this.wrapped) {
            block.held = (block.held ?? '') + String(delta.partial_json);
            return [];
          }
          block.answered = true;
          return [{ type: 'delta', index: 0, content: String(delta.partial_json) }];
        }
        if (block.tool === undefined || !delta.partial_json) return [];
        return [{ type: 'delta', index: 0, tool_calls: [{ index: block.tool, function: { arguments: String(delta.partial_json) } }] }];
      default:
        return [];
    }
  }

  /** `message_delta.usage` is cumulative: later values replace earlier ones, field by field. */
  private mergeUsage(u: WireUsage | null | undefined): void {
    if (!u) return;
    const next: WireUsage = { ...this.usage };
    for (const [k, v] of Object.entries(u) as [keyof WireUsage, never][]) if (v !== null && v !== undefined) next[k] = v;
    this.usage = next;
  }

  private finalUsage(): Usage | undefined {
    return this.usage ? toUsage(this.usage) : undefined;
  }
}
