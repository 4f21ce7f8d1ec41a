import { StringDecoder } from 'node:string_decoder';
import { createParser, EventSourceMessage } from 'eventsource-parser';
import { UpstreamError } from '../upstream-error';

export interface SseEvent {
  event?: string;
  data: string;
}

/** Largest amount of data that may build up without completing an event (a proxy must bound it). */
export const MAX_PENDING_EVENT_BYTES = 1024 * 1024;

/**
 * Parses an upstream SSE byte stream per the WHATWG event-stream rules with a real
 * parser: events split across reads (also inside a UTF-8 character), CRLF/CR/LF line ends, `data:`
 * with or without the space, comments and heartbeats, multi-line data. Yields each event as soon as
 * its blank line arrives.
 */
export async function* readSse(body: AsyncIterable<Buffer>, maxPending = MAX_PENDING_EVENT_BYTES): AsyncGenerator<SseEvent> {
  const ready: SseEvent[] = [];
  const parser = createParser({
    onEvent: (e: EventSourceMessage) => {
      ready.push({ event: e.event, data: e.data });
    },
  });
  // StringDecoder keeps a UTF-8 character split across reads for the next one, like a streaming
  // TextDecoder, without an ICU converter per stream (native memory × thousands of open streams).
  const decoder = new StringDecoder('utf8');
  let pending = 0;
  let atStart = true;
  let endsWithCr = false;
  for await (const chunk of body) {
    let text = decoder.write(chunk);
    if (atStart && text.length > 0) {
      // A byte-order mark at the start of the stream is not data (WHATWG: the decoder drops it).
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      atStart = false;
    }
    if (text.length > 0) endsWithCr = text.endsWith('\r');
    parser.feed(text);
    if (ready.length === 0) {
      pending += chunk.length;
      if (pending > maxPending) throw new UpstreamError('protocol', `an SSE event exceeded ${maxPending} bytes`);
      continue;
    }
    pending = 0;
    while (ready.length > 0) yield ready.shift()!;
  }
  parser.feed(decoder.end());
  // The parser holds a trailing CR (it may be the first half of a CRLF); at the end it can only be a
  // line end, so complete it. This never completes an event that lacked its blank line.
  if (endsWithCr) parser.feed('\n');
  // A final event without its blank line is incomplete and dropped (the HTML standard's event-stream rules): the parser holds it.
  while (ready.length > 0) yield ready.shift()!;
}
