import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What a fake upstream does for one request: a success, an error status, or one of the stream
 * faults real providers and proxies have shown. Each family's fake renders
 * the same scenario in its own wire format, so one provider contract suite drives them all.
 */
export interface Scenario {
  /** Assistant text; default `Hello from the fake!`. */
  text?: string;
  /** Reasoning/thinking text, sent before the answer where the family has such a field. */
  reasoning?: string;
  /** One tool call instead of text. */
  toolCall?: { id?: string; name: string; arguments: string };
  finish?: 'stop' | 'length' | 'tool_calls';
  /** Token counts the upstream reports; `null` = the upstream reports none. */
  usage?: { prompt: number; completion: number; reasoning?: number } | null;
  /** OpenAI-compatible only: usage on the finish chunk, in a separate `choices: []` chunk, or Groq's `x_groq.usage`. */
  usagePlacement?: 'finish' | 'separate' | 'x_groq';
  /** Groq timing fields (seconds). */
  timing?: { queue_time: number; prompt_time: number; completion_time: number };

  /** Streaming framing. */
  delivery?: 'event-per-write' | 'all-at-once' | 'byte-split';
  /** With byte-split: bytes per write (default 3, which also splits multi-byte UTF-8 characters). */
  splitEvery?: number;
  lineEnding?: 'lf' | 'crlf' | 'cr';
  /** `data:{...}` instead of `data: {...}`. */
  noSpaceAfterData?: boolean;
  /** Heartbeat comments (or Anthropic ping events) between events. */
  heartbeats?: boolean;
  /** Delay between stream writes (events or byte pieces). */
  chunkDelayMs?: number;

  /** Failures. */
  errorStatus?: number;
  /** `retry-after` header in seconds, on errorStatus responses. */
  retryAfter?: number;
  /**
   * An error answer (status >= 400) whose body cannot be read whole: its headers promise the whole
   * body and half arrives, then the connection drops (`cut`) or nothing more comes (`hang`).
   * `drip`: half the body, then one byte every 50 ms without end (chunked, so never complete).
   * `large`: the error JSON padded with spaces to LARGE_ERROR_BODY_BYTES (still valid JSON), written
   * 64 KiB every 5 ms until done or the client closes; `errorBodyBytesSent` counts what went out.
   */
  errorBody?: 'cut' | 'hang' | 'drip' | 'large';
  /** In-band error event after the first content event (HTTP 200 already sent). */
  midStreamError?: boolean;
  /** Connection closed after the first content event, before the end marker. */
  truncate?: boolean;
  /** Silence after the first content event, for this long. */
  stallMs?: number;
  /** Silence before sending the response headers. */
  stallBeforeHeadersMs?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

export const DEFAULT_TEXT = 'Hello from the fake!';

/** Size of an `errorBody: 'large'` answer. */
export const LARGE_ERROR_BODY_BYTES = 8 * 1024 * 1024;

/** Where a response reports the error-body bytes it wrote (its fake's counter). */
const ERROR_BYTES_SINK = new WeakMap<http.ServerResponse, (n: number) => void>();

/** Responses the fake itself cut (truncation): their close is not a client abort. */
const CUT_BY_FAKE = new WeakSet<http.ServerResponse>();

/** Text pieces: word by word, so a stream has several content events. */
export function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [text];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A fake upstream HTTP server on 127.0.0.1. Scenarios are queued per request (`next`) or fixed
 * (`always`); a request may also pick one through its model name (`scenarioFromModel`). Every request
 * is recorded, and connections the client closed before the response ended are counted.
 */
export abstract class FakeUpstream {
  readonly requests: RecordedRequest[] = [];
  /** Responses whose connection the client closed before the fake finished writing. */
  clientAborts = 0;
  /** Bytes of `drip` and `large` error bodies written before they ended or the client closed. */
  errorBodyBytesSent = 0;
  private readonly queue: Scenario[] = [];
  /** Responses still being written, and those that were so when `reset()` ran (their late closes belong to the previous test). */
  private readonly open = new Set<http.ServerResponse>();
  private readonly stale = new WeakSet<http.ServerResponse>();
  private fixed: Scenario = {};
  private server?: http.Server;
  url = '';

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => void this.dispatch(req, res));
    // The fakes run in the test's own process: a test that holds the event loop for seconds (the Gemini
    // fake computing thousands of embeddings on a loaded machine) must not have the server drop the idle
    // keep-alive socket the gateway's agent is about to reuse (ECONNRESET on the next request).
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  next(...scenarios: Scenario[]): this {
    this.queue.push(...scenarios);
    return this;
  }

  always(scenario: Scenario): this {
    this.fixed = scenario;
    return this;
  }

  reset(): this {
    this.queue.length = 0;
    this.fixed = {};
    this.requests.length = 0;
    this.clientAborts = 0;
    this.errorBodyBytesSent = 0;
    for (const res of this.open) this.stale.add(res);
    return this;
  }

  /** The family renders one request under a scenario. */
  protected abstract handle(req: RecordedRequest, scenario: Scenario, out: FakeResponse): Promise<void>;

  private async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: any = undefined;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    const recorded: RecordedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body };
    this.requests.push(recorded);
    const scenario = this.queue.shift() ?? this.fixed;
    let finished = false;
    this.open.add(res);
    res.on('close', () => {
      this.open.delete(res);
      if (!finished && !res.writableFinished && !this.stale.has(res) && !CUT_BY_FAKE.has(res)) this.clientAborts++;
    });
    ERROR_BYTES_SINK.set(res, (n) => {
      if (!this.stale.has(res)) this.errorBodyBytesSent += n;
    });
    const out = new FakeResponse(res, scenario);
    try {
      if (scenario.stallBeforeHeadersMs) await sleep(scenario.stallBeforeHeadersMs);
      if (res.destroyed) return;
      await this.handle(recorded, scenario, out);
    } catch {
      if (!res.destroyed) res.destroy();
    } finally {
      finished = res.writableFinished;
    }
  }
}

/** Writes a response the way the scenario asks: JSON, or SSE events with the chosen framing. */
export class FakeResponse {
  constructor(
    readonly res: http.ServerResponse,
    private readonly scenario: Scenario,
  ) {}

  get closed(): boolean {
    return this.res.destroyed || this.res.writableEnded;
  }

  json(status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    const mode = status >= 400 ? this.scenario.errorBody : undefined;
    if (mode === 'drip' || mode === 'large') return void this.errorBodyInPieces(status, text, headers, mode);
    this.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    if (status < 400 || !this.scenario.errorBody) return void this.res.end(text);
    const cut = this.scenario.errorBody === 'cut';
    // The half is on the wire before the cut, so the client has seen the status.
    this.res.write(text.slice(0, Math.floor(text.length / 2)), () => cut && this.cut());
  }

  private async errorBodyInPieces(status: number, text: string, headers: Record<string, string>, mode: 'drip' | 'large'): Promise<void> {
    const sent = (n: number) => ERROR_BYTES_SINK.get(this.res)?.(n);
    const write = (piece: string | Buffer) => {
      this.res.write(piece);
      sent(Buffer.byteLength(piece));
    };
    if (mode === 'drip') {
      this.res.writeHead(status, { 'content-type': 'application/json', ...headers });
      write(text.slice(0, Math.floor(text.length / 2)));
      for (let i = Math.floor(text.length / 2); !this.closed; i++) {
        await sleep(50);
        if (!this.closed) write(text[i] ?? ' ');
      }
      return;
    }
    const json = Buffer.from(text, 'utf8');
    const padded = Buffer.concat([json, Buffer.alloc(LARGE_ERROR_BODY_BYTES - json.length, ' ')]);
    this.res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(LARGE_ERROR_BODY_BYTES), ...headers });
    for (let i = 0; i < padded.length && !this.closed; i += 64 * 1024) {
      write(padded.subarray(i, i + 64 * 1024));
      await sleep(5);
    }
    this.end();
  }

  /** An error response before any stream byte, with `retry-after` when the scenario sets it. */
  error(status: number, body: unknown): void {
    const headers: Record<string, string> = {};
    if (this.scenario.retryAfter !== undefined) headers['retry-after'] = String(this.scenario.retryAfter);
    this.json(status, body, headers);
  }

  startStream(headers: Record<string, string> = {}): void {
    this.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...headers });
    this.res.flushHeaders();
  }

  /** One SSE event (`data` and optional `event` name) with the scenario's framing. */
  async event(data: string, event?: string): Promise<void> {
    const s = this.scenario;
    const nl = s.lineEnding === 'crlf' ? '\r\n' : s.lineEnding === 'cr' ? '\r' : '\n';
    const sep = s.noSpaceAfterData ? 'data:' : 'data: ';
    let text = '';
    if (s.heartbeats) text += `: keep-alive${nl}${nl}`;
    if (event) text += `event: ${event}${nl}`;
    text += `${sep}${data}${nl}${nl}`;
    await this.write(text);
  }

  async write(text: string): Promise<void> {
    if (this.closed) return;
    const s = this.scenario;
    const buf = Buffer.from(text, 'utf8');
    if (s.delivery === 'byte-split') {
      const n = s.splitEvery ?? 3;
      for (let i = 0; i < buf.length && !this.closed; i += n) {
        this.res.write(buf.subarray(i, i + n));
        await sleep(s.chunkDelayMs ?? 1);
      }
      return;
    }
    this.res.write(buf);
    if (s.delivery !== 'all-at-once' && s.chunkDelayMs) await sleep(s.chunkDelayMs);
  }

  async stall(): Promise<void> {
    if (this.scenario.stallMs) await sleep(this.scenario.stallMs);
  }

  end(): void {
    if (!this.closed) this.res.end();
  }

  /** Cuts the connection without a proper end (truncation). */
  cut(): void {
    CUT_BY_FAKE.add(this.res);
    this.res.destroy();
  }
}
