import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { GatewayRequest } from '../common/http/request-context';
import { respondJson, respondSse, SseEncoder, StreamBrokenError } from '../common/http/responder';
import type { ChatResult, StreamEvent, Usage, UpstreamTiming } from '../providers/provider-adapter';
import type { ChatAnswer } from './chat.service';
import { ChatIdentity, chunkBody, completionBody, TRAILER_NAMES, usageChunkBody, usageHeaders } from './chat.mapper';

function identity(model: string): ChatIdentity {
  return { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model };
}

/**
 * The chat completions wire format of a stream: one `chat.completion.chunk` per event, the usage
 * chunk when `stream_options.include_usage` asked for it, `data: [DONE]`, the usage-derived
 * `Gateway-*` trailers; a failure after the first byte is one `data: {"error":…}` event and no [DONE].
 */
export class ChatSseEncoder implements SseEncoder<StreamEvent> {
  private first = true;
  private usage?: Usage;
  private timing?: UpstreamTiming;

  constructor(
    private readonly idn: ChatIdentity,
    private readonly includeUsage: boolean,
  ) {}

  event(e: StreamEvent): string | undefined {
    if (e.type === 'usage') {
      this.usage = e.usage;
      this.timing = e.timing;
      return undefined;
    }
    const chunk = chunkBody(this.idn, e, this.first);
    this.first = false;
    return chunk ? `data: ${JSON.stringify(chunk)}\n\n` : undefined;
  }

  end(): string {
    const usage = this.includeUsage && this.usage ? `data: ${JSON.stringify(usageChunkBody(this.idn, this.usage, this.timing))}\n\n` : '';
    return `${usage}data: [DONE]\n\n`;
  }

  failed(err: StreamBrokenError): string {
    return `data: ${JSON.stringify(err.toBody())}\n\n`;
  }

  trailers(): Record<string, string> {
    return usageHeaders(this.usage, this.timing);
  }
}

/** How one wire format writes the chat pipeline's answer: the body of a whole result, or the encoder of a stream. */
export interface AnswerFormat {
  body(result: ChatResult): unknown;
  encoder(): SseEncoder<StreamEvent>;
}

/**
 * Writes the chat pipeline's answer in `format` (chat completions, the Responses API): a JSON body
 * or an SSE stream, with the same usage-derived `Gateway-*` headers, sent as trailers on a stream.
 */
export function respondAnswer(req: GatewayRequest, res: Response, answer: ChatAnswer, signal: AbortSignal, format: AnswerFormat): Promise<void> | void {
  if (!answer.stream) {
    const r = answer.result;
    return respondJson(req, res, answer.served, usageHeaders(r.usage, r.timing), format.body(r));
  }
  return respondSse(req, res, answer.served, answer.events, format.encoder(), TRAILER_NAMES, signal);
}

/** Writes the chat pipeline's answer as chat completions: a `chat.completion` JSON body or its SSE stream. */
export function respondChat(req: GatewayRequest, res: Response, answer: ChatAnswer, includeUsage: boolean, signal: AbortSignal): Promise<void> | void {
  const idn = identity(answer.served.target.model);
  return respondAnswer(req, res, answer, signal, { body: (r) => completionBody(idn, r), encoder: () => new ChatSseEncoder(idn, includeUsage) });
}
