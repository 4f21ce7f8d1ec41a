import type { StreamEvent, UpstreamTiming, Usage } from '../provider-adapter';
import { readSse } from '../sse/sse-reader';
import { UpstreamError } from '../upstream-error';
import { fromWireChunk, inBandError } from './openai-response.mapper';
import type { WireChunk } from './openai.wire';
import type { OpenAiVariant } from './variants';

const DONE = '[DONE]';

function parseData(data: string): WireChunk {
  try {
    return JSON.parse(data) as WireChunk;
  } catch {
    throw new UpstreamError('protocol', `a stream event is not JSON (${data.length} bytes)`);
  }
}

/**
 * Turns an OpenAI-compatible SSE body into stream events. Framing
 * is readSse's job, so only complete `data` payloads are parsed. Deltas and finishes are yielded as
 * they arrive; usage, which families place on the finish chunk, on a separate `choices: []` chunk
 * or in Groq's `x_groq.usage` (sometimes two of these at once), is reported once, at the end.
 * `[DONE]` ends the stream; a body that ends without it is accepted only when every choice has
 * finished, otherwise it was cut (protocol error).
 */
export async function* readChatStream(body: AsyncIterable<Buffer>, variant: OpenAiVariant): AsyncGenerator<StreamEvent> {
  let usage: Usage | undefined;
  let timing: UpstreamTiming | undefined;
  const started = new Set<number>();
  const finished = new Set<number>();
  let done = false;
  for await (const sse of readSse(body)) {
    if (sse.data === DONE) {
      done = true;
      break;
    }
    if (sse.event === 'error') throw inBandError(errorPayload(sse.data));
    const mapped = fromWireChunk(parseData(sse.data), variant);
    if (mapped.usage) usage = mapped.usage;
    if (mapped.timing) timing = { ...timing, ...mapped.timing };
    for (const e of mapped.events) {
      if (e.type === 'delta') started.add(e.index);
      else if (e.type === 'finish') {
        started.add(e.index);
        finished.add(e.index);
      }
      yield e;
    }
  }
  if (!done && (finished.size === 0 || [...started].some((i) => !finished.has(i)))) {
    throw new UpstreamError('protocol', 'the stream ended before [DONE] and before every choice finished');
  }
  if (usage) yield timing ? { type: 'usage', usage, timing } : { type: 'usage', usage };
}

/** The payload of an `event: error` SSE event, JSON or not. */
function errorPayload(data: string): string | NonNullable<WireChunk['error']> {
  try {
    const parsed = JSON.parse(data) as { error?: WireChunk['error'] };
    return parsed?.error ?? data;
  } catch {
    return data;
  }
}
