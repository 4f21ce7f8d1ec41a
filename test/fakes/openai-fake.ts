import { DEFAULT_TEXT, FakeResponse, FakeUpstream, pieces, RecordedRequest, Scenario } from './fake-upstream';

/**
 * A fake upstream speaking the OpenAI Chat Completions and Embeddings wire format, with the differences of two variants:
 *   groq:  usage with `queue_time`/`prompt_time`/`completion_time`/`total_time`; in streams the
 *          finish chunk carries `x_groq.usage` (and, when `include_usage` was asked, a separate
 *          `choices: []` usage chunk follows as well: both at once); `message.reasoning`.
 *   azure: `/openai/deployments/{d}/…?api-version=` or `/openai/v1/…`, `api-key` header, a first
 *          stream chunk with `choices: []` and `prompt_filter_results`, error bodies with `status`
 *          and `innererror`, `retry-after-ms` next to `retry-after`.
 * Usage in streams follows OpenAI: a separate `choices: []` chunk only when the request asked for
 * `stream_options.include_usage` (then `usage: null` on every other chunk); placements `finish`
 * and `x_groq` are sent whether asked or not, as Mistral and Groq do.
 */
export type OpenAiFakeVariant = 'openai' | 'groq' | 'azure';

export interface OpenAiFakeOptions {
  variant?: OpenAiFakeVariant;
  /** When set, requests without this key (Bearer, or Azure's `api-key`) get OpenAI's 401. */
  apiKey?: string;
}

interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  completion_tokens_details: { reasoning_tokens: number };
  queue_time?: number;
  prompt_time?: number;
  completion_time?: number;
  total_time?: number;
}

const CREATED = 1755000000;
const GROQ_TIMING = { queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 };
const AZURE_FILTER = {
  hate: { filtered: false, severity: 'safe' },
  self_harm: { filtered: false, severity: 'safe' },
  sexual: { filtered: false, severity: 'safe' },
  violence: { filtered: false, severity: 'safe' },
};

const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Deterministic unit vector for a text, in float32 precision so base64 round-trips exactly. */
export function fakeEmbedding(text: string, dims: number): number[] {
  const v = Array.from({ length: dims }, (_, i) => {
    let h = 2166136261 ^ (i + 1);
    for (let j = 0; j < text.length; j++) h = Math.imul(h ^ text.charCodeAt(j), 16777619);
    return ((h >>> 0) / 2 ** 32) * 2 - 1;
  });
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => Math.fround(x / norm));
}

function base64Floats(v: number[]): string {
  const buf = Buffer.alloc(v.length * 4);
  v.forEach((x, i) => buf.writeFloatLE(x, i * 4));
  return buf.toString('base64');
}

/**
 * What OpenAI checks in `response_format` (its 400 messages): `json_schema` needs a valid name and an
 * object schema; with `strict: true` every object must set `additionalProperties: false` and list all
 * its properties as required (OpenAI's "Structured Outputs" rules). The answer is the scenario's text.
 */
function responseFormatProblem(rf: any): string | undefined {
  if (rf === undefined || rf?.type === 'text' || rf?.type === 'json_object') return undefined;
  if (rf?.type !== 'json_schema') return `Invalid value: '${rf?.type}'. Supported values are: 'json_object', 'json_schema', and 'text'.`;
  const js = rf.json_schema;
  if (typeof js?.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(js.name)) return "Invalid 'response_format.json_schema.name': string does not match pattern.";
  if (js.schema === null || typeof js.schema !== 'object' || Array.isArray(js.schema)) return "Invalid type for 'response_format.json_schema.schema': expected an object.";
  if (js.strict !== true) return undefined;
  const walk = (node: any, context: string): string | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    if (Array.isArray(node)) {
      for (const n of node) {
        const p = walk(n, context);
        if (p) return p;
      }
      return undefined;
    }
    if (node.type === 'object' || node.properties) {
      if (node.additionalProperties !== false) return `Invalid schema for response_format '${js.name}': In context=(${context}), 'additionalProperties' is required to be supplied and to be false.`;
      const missing = Object.keys(node.properties ?? {}).find((k) => !(node.required ?? []).includes(k));
      if (missing) return `Invalid schema for response_format '${js.name}': In context=(${context}), 'required' is required to be supplied and to be an array including every key in properties. Missing '${missing}'.`;
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === 'enum' || k === 'const' || k === 'default') continue;
      const p = walk(v, k === 'properties' || k === '$defs' ? context : `${context}${context ? ', ' : ''}'${k}'`);
      if (p) return p;
    }
    return undefined;
  };
  return walk(js.schema, '');
}

export class OpenAiFake extends FakeUpstream {
  readonly variant: OpenAiFakeVariant;
  private readonly apiKey?: string;
  private seq = 0;

  constructor(opts: OpenAiFakeOptions = {}) {
    super();
    this.variant = opts.variant ?? 'openai';
    this.apiKey = opts.apiKey;
  }

  protected async handle(req: RecordedRequest, s: Scenario, out: FakeResponse): Promise<void> {
    const url = new URL(req.path, 'http://fake');
    const route = this.route(url, req);
    if ('error' in route) return out.json(route.status, route.error);
    if (this.apiKey !== undefined && !this.authorised(req)) return out.json(401, this.errorBody(401));
    if (s.errorStatus) return this.sendError(s, out);
    const invalid = route.op === 'chat' ? responseFormatProblem(req.body?.response_format) : undefined;
    if (invalid) return out.json(400, { error: { message: invalid, type: 'invalid_request_error', param: 'response_format', code: null } });
    if (route.op === 'embeddings') return this.embeddings(req, route.model, out);
    if (req.body?.stream === true) return this.stream(req, route.model, s, out);
    return this.json(req, route.model, s, out);
  }

  private route(url: URL, req: RecordedRequest): { op: 'chat' | 'embeddings'; model: string } | { status: number; error: unknown } {
    const op = (name: string) => (name === 'embeddings' ? 'embeddings' : 'chat');
    const bodyModel = typeof req.body?.model === 'string' ? req.body.model : '';
    if (this.variant !== 'azure') {
      const m = url.pathname.match(/\/(chat\/completions|embeddings)$/);
      if (req.method === 'POST' && m) return { op: op(m[1]), model: bodyModel };
      return { status: 404, error: { error: { message: `Invalid URL (${req.method} ${url.pathname})`, type: 'invalid_request_error', param: null, code: null } } };
    }
    const deployment = url.pathname.match(/^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/);
    if (req.method === 'POST' && deployment) {
      if (!url.searchParams.get('api-version')) {
        return { status: 404, error: { error: { code: '404', message: 'Resource not found' } } };
      }
      return { op: op(deployment[2]), model: decodeURIComponent(deployment[1]) };
    }
    const v1 = url.pathname.match(/^\/openai\/v1\/(chat\/completions|embeddings)$/);
    if (req.method === 'POST' && v1) return { op: op(v1[1]), model: bodyModel };
    return { status: 404, error: { error: { code: '404', message: 'Resource not found' } } };
  }

  private authorised(req: RecordedRequest): boolean {
    if (this.variant === 'azure' && req.headers['api-key'] === this.apiKey) return true;
    return req.headers.authorization === `Bearer ${this.apiKey}`;
  }

  /** The provider's error body (Azure adds `status`/`innererror`). */
  errorBody(status: number): unknown {
    const byStatus: Record<number, { message: string; type: string | null; code: string | null; param?: string }> = {
      400: { message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", type: 'invalid_request_error', code: 'unsupported_parameter', param: 'max_tokens' },
      401: { message: 'Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.', type: 'invalid_request_error', code: 'invalid_api_key' },
      403: { message: 'Country, region, or territory not supported', type: 'request_forbidden', code: 'unsupported_country_region_territory' },
      404: { message: 'The model `x` does not exist or you do not have access to it.', type: 'invalid_request_error', code: 'model_not_found' },
      429: { message: 'Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 2s.', type: 'requests', code: 'rate_limit_exceeded' },
      500: { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', code: null },
      503: { message: 'The engine is currently overloaded, please try again later', type: 'server_error', code: null },
    };
    const e = byStatus[status] ?? { message: `Upstream error ${status}`, type: 'server_error', code: null };
    if (this.variant === 'azure' && status === 400) {
      return {
        error: {
          message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
          type: null, param: 'prompt', code: 'content_filter', status: 400,
          innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: AZURE_FILTER },
        },
      };
    }
    if (this.variant === 'azure') return { error: { ...e, param: e.param ?? null, status } };
    if (this.variant === 'groq') return { error: e.code ? { message: e.message, type: e.type, code: e.code } : { message: e.message, type: e.type } };
    return { error: { message: e.message, type: e.type, param: e.param ?? null, code: e.code } };
  }

  private sendError(s: Scenario, out: FakeResponse): void {
    const headers: Record<string, string> = { 'x-request-id': `req_${++this.seq}` };
    if (s.retryAfter !== undefined) {
      headers['retry-after'] = String(s.retryAfter);
      if (this.variant === 'azure') headers['retry-after-ms'] = String(s.retryAfter * 1000);
    }
    out.json(s.errorStatus!, this.errorBody(s.errorStatus!), headers);
  }

  private usageOf(req: RecordedRequest, s: Scenario, text: string): WireUsage | null {
    if (s.usage === null) return null;
    const prompt = s.usage?.prompt ?? tokens(JSON.stringify(req.body?.messages ?? []));
    const completion = s.usage?.completion ?? tokens(text) + (s.usage?.reasoning ?? 0);
    const usage: WireUsage = {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: s.usage?.reasoning ?? 0 },
    };
    if (this.variant === 'groq') {
      const t = s.timing ?? GROQ_TIMING;
      Object.assign(usage, t, { total_time: Number((t.queue_time + t.prompt_time + t.completion_time).toFixed(6)) });
    }
    return usage;
  }

  private get reasoningField(): 'reasoning' | 'reasoning_content' {
    return this.variant === 'groq' ? 'reasoning' : 'reasoning_content';
  }

  private choiceCount(req: RecordedRequest): number {
    const n = req.body?.n;
    return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : 1;
  }

  private async json(req: RecordedRequest, model: string, s: Scenario, out: FakeResponse): Promise<void> {
    const text = s.text ?? DEFAULT_TEXT;
    const finish = s.finish ?? (s.toolCall ? 'tool_calls' : 'stop');
    const message: Record<string, unknown> = { role: 'assistant', content: s.toolCall ? null : text, refusal: null, annotations: [] };
    if (s.toolCall) {
      message.tool_calls = [{ id: s.toolCall.id ?? 'call_fake1', type: 'function', function: { name: s.toolCall.name, arguments: s.toolCall.arguments } }];
    }
    if (s.reasoning) message[this.reasoningField] = s.reasoning;
    const choices = Array.from({ length: this.choiceCount(req) }, (_, index) => ({
      index, message, logprobs: null, finish_reason: finish,
      ...(this.variant === 'azure' ? { content_filter_results: AZURE_FILTER } : {}),
    }));
    const usage = this.usageOf(req, s, text);
    const body: Record<string, unknown> = {
      id: `chatcmpl-fake${++this.seq}`, object: 'chat.completion', created: CREATED, model: model || 'fake', system_fingerprint: 'fp_fake', choices,
    };
    if (usage && s.usagePlacement !== 'x_groq') body.usage = usage;
    if (this.variant === 'groq') body.x_groq = s.usagePlacement === 'x_groq' && usage ? { id: 'req_fake', usage } : { id: 'req_fake' };
    if (this.variant === 'azure') body.prompt_filter_results = [{ prompt_index: 0, content_filter_results: AZURE_FILTER }];
    await out.stall();
    if (s.truncate) {
      const whole = JSON.stringify(body);
      out.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(whole) });
      out.res.write(whole.slice(0, Math.floor(whole.length / 2)));
      await sleep(20);
      return out.cut();
    }
    out.json(200, body, { 'x-request-id': `req_${this.seq}` });
  }

  private async stream(req: RecordedRequest, model: string, s: Scenario, out: FakeResponse): Promise<void> {
    const id = `chatcmpl-fake${++this.seq}`;
    const includeUsage = req.body?.stream_options?.include_usage === true;
    const n = this.choiceCount(req);
    const text = s.text ?? DEFAULT_TEXT;
    const finish = s.finish ?? (s.toolCall ? 'tool_calls' : 'stop');
    const usage = this.usageOf(req, s, text);
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        id, object: 'chat.completion.chunk', created: CREATED, model: model || 'fake', system_fingerprint: 'fp_fake', choices,
        ...(includeUsage ? { usage: null } : {}), ...extra,
      });
    const each = (delta: (i: number) => Record<string, unknown>, finishReason: string | null = null) =>
      Array.from({ length: n }, (_, index) => ({
        index, delta: delta(index), logprobs: null, finish_reason: finishReason,
        ...(this.variant === 'azure' ? { content_filter_results: finishReason ? {} : AZURE_FILTER } : {}),
      }));

    out.startStream({ 'x-request-id': id });
    if (this.variant === 'azure') {
      // Azure's first chunk: no choices, empty id and model, the prompt filter results.
      await out.event(JSON.stringify({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: [{ prompt_index: 0, content_filter_results: AZURE_FILTER }] }));
    }
    await out.event(chunk(each(() => ({ role: 'assistant', content: '', refusal: null })), this.variant === 'groq' ? { x_groq: { id: 'req_fake' } } : {}));
    for (const piece of s.reasoning ? pieces(s.reasoning) : []) await out.event(chunk(each(() => ({ [this.reasoningField]: piece }))));

    // After the first content event: the failure the scenario asks for.
    const afterFirst = async (): Promise<boolean> => {
      if (s.midStreamError) {
        await out.event(JSON.stringify({ error: { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', param: null, code: null } }));
        out.end();
        return false;
      }
      if (s.truncate) {
        await sleep(20);
        out.cut();
        return false;
      }
      if (s.stallMs) await out.stall();
      return !out.closed;
    };

    if (s.toolCall) {
      const call = s.toolCall;
      await out.event(chunk(each(() => ({ tool_calls: [{ index: 0, id: call.id ?? 'call_fake1', type: 'function', function: { name: call.name, arguments: '' } }] }))));
      if (!(await afterFirst())) return;
      const third = Math.max(1, Math.ceil(call.arguments.length / 3));
      for (let i = 0; i < call.arguments.length; i += third) {
        const fragment = call.arguments.slice(i, i + third);
        await out.event(chunk(each(() => ({ tool_calls: [{ index: 0, function: { arguments: fragment } }] }))));
      }
    } else {
      const parts = pieces(text);
      for (let i = 0; i < parts.length; i++) {
        await out.event(chunk(each(() => ({ content: parts[i] }))));
        if (i === 0 && !(await afterFirst())) return;
      }
    }

    const placement = s.usagePlacement;
    const finishExtra: Record<string, unknown> = {};
    if (usage && placement === 'finish') finishExtra.usage = usage;
    if (this.variant === 'groq' || placement === 'x_groq') {
      finishExtra.x_groq = usage && (placement === 'x_groq' || (placement === undefined && this.variant === 'groq')) ? { id: 'req_fake', usage } : { id: 'req_fake' };
    }
    await out.event(chunk(each(() => ({}), finish), finishExtra));
    const separate = placement === 'separate' || (placement === undefined && includeUsage);
    if (usage && includeUsage && separate) await out.event(chunk([], { usage }));
    await out.event('[DONE]');
    out.end();
  }

  private async embeddings(req: RecordedRequest, model: string, out: FakeResponse): Promise<void> {
    const raw = req.body?.input;
    // A string, an array of strings, one token array, or an array of token arrays.
    const inputs: unknown[] = Array.isArray(raw) && raw.length > 0 && typeof raw[0] !== 'number' ? raw : [raw];
    if (inputs.some((x) => x === undefined || x === '')) {
      return out.json(400, { error: { message: "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", type: 'invalid_request_error', param: null, code: null } });
    }
    const dims = typeof req.body?.dimensions === 'number' ? req.body.dimensions : 16;
    const base64 = req.body?.encoding_format === 'base64';
    const texts = inputs.map((x) => (typeof x === 'string' ? x : JSON.stringify(x)));
    const data = texts.map((t, index) => {
      const v = fakeEmbedding(t, dims);
      return { object: 'embedding', index, embedding: base64 ? base64Floats(v) : v };
    });
    const prompt = texts.reduce((sum, t) => sum + tokens(t), 0);
    out.json(200, { object: 'list', data, model: model || 'fake-embedding', usage: { prompt_tokens: prompt, total_tokens: prompt } });
  }
}
