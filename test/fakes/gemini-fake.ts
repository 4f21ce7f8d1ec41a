import { DEFAULT_TEXT, FakeResponse, FakeUpstream, pieces, RecordedRequest, Scenario } from './fake-upstream';

/**
 * Gemini-only switches on top of the shared Scenario (the Gemini-specific stream and error cases).
 * Pass them with `fake.next({ ... } as GeminiScenario)`.
 */
export interface GeminiScenario extends Scenario {
  /** A blocked prompt: `promptFeedback.blockReason` and no candidates. */
  blockReason?: string;
  /** The raw finishReason to send instead of the one derived from `finish` (e.g. SAFETY). */
  finishReason?: string;
  /** `thoughtSignature` on the functionCall part (default: a fixed base64 value; `null` = none). */
  thoughtSignature?: string | null;
  /** Errors in the array form the OpenAI-compatibility endpoint uses (`[{error:…}]`). */
  errorArray?: boolean;
  /** A 400 INVALID_ARGUMENT with reason API_KEY_INVALID, as Google answers a bad key. */
  badApiKey?: boolean;
  /** Answer the stream endpoint with the JSON array even when `alt=sse` was asked for (a proxy that drops the query). */
  jsonArrayStream?: boolean;
  /** 429 with `google.rpc.RetryInfo.retryDelay` (seconds) in the body and no retry-after header. */
  retryDelaySeconds?: number;
}

/** Base64 of opaque bytes, with `+`, `/` and padding, as Gemini's signatures have. */
export const FAKE_THOUGHT_SIGNATURE = 'CiQB++++ZmFrZf/+c2lnbg==';
/** Full size of the fake embedding model; `outputDimensionality` truncates (without renormalising, like Google). */
export const FAKE_EMBEDDING_DIMS = 3072;

/**
 * Google's cap on batchEmbedContents, stated here independently of the adapter's constant so a test
 * against the fake checks the adapter rather than itself.
 */
export const FAKE_MAX_EMBED_BATCH = 100;

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 408: 'DEADLINE_EXCEEDED', 409: 'ABORTED',
  429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE', 504: 'DEADLINE_EXCEEDED',
};

const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4));

export function googleError(code: number, message: string, details: unknown[] = []) {
  return { error: { code, message, status: STATUS_NAMES[code] ?? 'UNKNOWN', ...(details.length ? { details } : {}) } };
}

/** A deterministic unit vector of the full size for a text; truncation is left to the caller. */
function fullVector(text: string): number[] {
  const v = Array.from({ length: FAKE_EMBEDDING_DIMS }, (_, i) => {
    let h = 2166136261 ^ i;
    for (let j = 0; j < text.length; j++) h = Math.imul(h ^ text.charCodeAt(j), 16777619);
    return ((h >>> 0) / 2 ** 32) * 2 - 1;
  });
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

export function fakeEmbedding(text: string, dims?: number): number[] {
  return fullVector(text).slice(0, dims ?? FAKE_EMBEDDING_DIMS);
}

/**
 * A fake of Google's native Gemini API on 127.0.0.1:
 * `POST /models/{m}:generateContent`, `:streamGenerateContent?alt=sse` (CRLF framing unless the
 * scenario sets `lineEnding`, no `event:` lines, no [DONE]; the stream just ends; without `alt=sse`
 * a JSON array), `:embedContent` and `:batchEmbedContents` (more than 100 requests in one batch is
 * Google's 400 INVALID_ARGUMENT).
 *
 * Like the real API, thought parts are only sent when the request asks for them
 * (`thinkingConfig.includeThoughts`); `thoughtsTokenCount` is reported whenever the scenario has
 * reasoning tokens. The scenario's `usage.completion` is OpenAI-style (thoughts included), so the
 * fake sends `candidatesTokenCount = completion - reasoning`. A tool call finishes with `STOP`
 * (Gemini never says anything else) and carries no id. Truncation ends the body cleanly before any
 * finishReason (for Gemini the end of the body is the only end marker).
 */
export class GeminiFake extends FakeUpstream {
  protected async handle(req: RecordedRequest, scenario: Scenario, raw: FakeResponse): Promise<void> {
    const s = scenario as GeminiScenario;
    // Gemini's SSE uses CRLF unless the scenario picks a line ending.
    const out = new FakeResponse(raw.res, { ...s, lineEnding: s.lineEnding ?? 'crlf' });
    const m = /^(?:\/v1beta)?\/models\/([^/:?]+):(\w+)(\?.*)?$/.exec(req.path);
    if (req.method !== 'POST' || !m) return out.json(404, googleError(404, `Unknown path ${req.path}`));
    const [, model, method, query] = m;
    if (s.errorStatus !== undefined || s.badApiKey) return this.error(s, out);
    const invalid = method === 'generateContent' || method === 'streamGenerateContent' ? schemaProblem(req.body?.generationConfig) : undefined;
    if (invalid) return out.json(400, googleError(400, invalid));
    switch (method) {
      case 'generateContent':
        if (!Array.isArray(req.body?.contents)) return out.json(400, googleError(400, '* GenerateContentRequest.contents: contents is not specified'));
        return out.json(200, this.whole(req, s, model));
      case 'streamGenerateContent':
        if (!Array.isArray(req.body?.contents)) return out.json(400, googleError(400, '* GenerateContentRequest.contents: contents is not specified'));
        return this.stream(req, s, model, out, !s.jsonArrayStream && /[?&]alt=sse\b/.test(query ?? ''));
      case 'embedContent':
        return out.json(200, { embedding: { values: fakeEmbedding(textOf(req.body?.content), req.body?.outputDimensionality) } });
      case 'batchEmbedContents': {
        const requests: any[] = req.body?.requests ?? [];
        if (requests.length > FAKE_MAX_EMBED_BATCH) {
          return out.json(400, googleError(400, `* BatchEmbedContentsRequest.requests: at most ${FAKE_MAX_EMBED_BATCH} requests can be in one batch\n`));
        }
        const wrong = requests.find((r) => r.model !== `models/${model}`);
        if (wrong) return out.json(400, googleError(400, `Model name ${wrong.model} in requests[] does not match models/${model}`));
        return out.json(200, { embeddings: requests.map((r) => ({ values: fakeEmbedding(textOf(r.content), r.outputDimensionality) })) });
      }
      default:
        return out.json(404, googleError(404, `Method ${method} not found`));
    }
  }

  private error(s: GeminiScenario, out: FakeResponse): void {
    const status = s.badApiKey ? 400 : s.errorStatus!;
    const details: unknown[] = [];
    if (s.badApiKey) {
      details.push({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } });
    }
    const delay = s.retryDelaySeconds ?? (status === 429 ? s.retryAfter : undefined);
    if (delay !== undefined) details.push({ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${delay}s` });
    const message = s.badApiKey ? 'API key not valid. Please pass a valid API key.' : status === 503 ? 'The model is overloaded. Please try again later.' : 'fake failure';
    const body = googleError(status, message, details);
    if (s.retryDelaySeconds !== undefined) return out.json(status, s.errorArray ? [body] : body);
    out.error(status, s.errorArray ? [body] : body);
  }

  private whole(req: RecordedRequest, s: GeminiScenario, model: string) {
    if (s.blockReason) return this.blocked(req, s, model);
    const parts: any[] = [];
    if (this.thoughts(req, s)) parts.push({ text: s.reasoning, thought: true });
    if (s.toolCall) parts.push(this.functionCallPart(s));
    else parts.push({ text: s.text ?? DEFAULT_TEXT });
    return {
      candidates: this.indices(req).map((index) => ({ content: { role: 'model', parts }, finishReason: this.finishReason(s), index })),
      ...this.usage(req, s, true),
      modelVersion: model,
      responseId: 'fake-response',
    };
  }

  private async stream(req: RecordedRequest, s: GeminiScenario, model: string, out: FakeResponse, sse: boolean): Promise<void> {
    const fragments: string[] = [];
    const send = async (fragment: object, raw = false) => {
      const data = JSON.stringify(raw ? fragment : { ...fragment, modelVersion: model, responseId: 'fake-response' });
      if (sse) await out.event(data);
      else fragments.push(data);
    };
    // Without alt=sse Google streams one JSON array; a cut stream leaves it unclosed.
    const close = async (complete: boolean) => {
      if (!sse) {
        out.res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
        await out.write(`[${fragments.join(',\r\n')}${complete ? ']' : ''}`);
      }
      out.end();
    };
    if (sse) out.startStream();
    const candidates = (parts: unknown[], finish: boolean) =>
      this.indices(req).map((index) => ({ content: { role: 'model', parts }, ...(finish ? { finishReason: this.finishReason(s) } : {}), index }));

    if (s.blockReason) {
      await send(this.blocked(req, s, model));
      return close(true);
    }
    if (this.thoughts(req, s)) {
      for (const p of pieces(s.reasoning!)) await send({ candidates: candidates([{ text: p, thought: true }], false), ...this.usage(req, s, false) });
    }
    const content = s.toolCall ? [[this.functionCallPart(s)]] : pieces(s.text ?? DEFAULT_TEXT).map((p) => [{ text: p }]);
    // The finish rides on the last content fragment, as Gemini sends it; when the first content
    // fragment is also the last and something must happen after it, the finish gets its own fragment.
    const separateFinish = (s.truncate || s.midStreamError || !!s.stallMs) && content.length === 1;
    for (let i = 0; i < content.length; i++) {
      const last = i === content.length - 1 && !separateFinish;
      await send({ candidates: candidates(content[i], last), ...this.usage(req, s, last) });
      if (i === 0 && s.midStreamError) {
        await send(googleError(500, 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting'), true);
        return close(true);
      }
      if (i === 0 && s.truncate) return close(false);
      if (i === 0 && s.stallMs) await out.stall();
    }
    if (separateFinish) await send({ candidates: candidates([{ text: '' }], true), ...this.usage(req, s, true) });
    return close(true);
  }

  private blocked(req: RecordedRequest, s: GeminiScenario, model: string) {
    const prompt = s.usage ? s.usage.prompt : this.promptTokens(req);
    return { promptFeedback: { blockReason: s.blockReason }, usageMetadata: { promptTokenCount: prompt, totalTokenCount: prompt }, modelVersion: model };
  }

  private thoughts(req: RecordedRequest, s: GeminiScenario): boolean {
    return !!s.reasoning && req.body?.generationConfig?.thinkingConfig?.includeThoughts === true;
  }

  private functionCallPart(s: GeminiScenario) {
    const sig = s.thoughtSignature === undefined ? FAKE_THOUGHT_SIGNATURE : s.thoughtSignature;
    return { functionCall: { name: s.toolCall!.name, args: JSON.parse(s.toolCall!.arguments || '{}') }, ...(sig ? { thoughtSignature: sig } : {}) };
  }

  private finishReason(s: GeminiScenario): string {
    return s.finishReason ?? (s.finish === 'length' ? 'MAX_TOKENS' : 'STOP');
  }

  private indices(req: RecordedRequest): number[] {
    return Array.from({ length: req.body?.generationConfig?.candidateCount ?? 1 }, (_, i) => i);
  }

  private promptTokens(req: RecordedRequest): number {
    return tokens(JSON.stringify(req.body?.contents ?? []) + JSON.stringify(req.body?.systemInstruction ?? ''));
  }

  /** usageMetadata as Gemini sends it: prompt-only on early fragments, the final counts on the last one. */
  private usage(req: RecordedRequest, s: GeminiScenario, final: boolean) {
    if (s.usage === null) return {};
    const prompt = s.usage?.prompt ?? this.promptTokens(req);
    if (!final) return { usageMetadata: { promptTokenCount: prompt, totalTokenCount: prompt } };
    const reasoning = s.usage?.reasoning ?? (s.reasoning ? tokens(s.reasoning) : undefined);
    const completion = s.usage?.completion ?? tokens(s.toolCall ? s.toolCall.arguments : (s.text ?? DEFAULT_TEXT)) + (reasoning ?? 0);
    const candidates = completion - (reasoning ?? 0);
    return {
      usageMetadata: {
        promptTokenCount: prompt,
        candidatesTokenCount: candidates,
        ...(reasoning !== undefined ? { thoughtsTokenCount: reasoning } : {}),
        totalTokenCount: prompt + candidates + (reasoning ?? 0),
        promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
      },
    };
  }
}

/** The fields of Gemini's `Schema` message; any other key in a `responseSchema` is refused by the API's JSON parser. */
export const GEMINI_SCHEMA_FIELDS = new Set([
  'type', 'format', 'title', 'description', 'nullable', 'enum', 'maxItems', 'minItems', 'properties', 'required', 'minProperties',
  'maxProperties', 'minLength', 'maxLength', 'pattern', 'example', 'anyOf', 'propertyOrdering', 'default', 'items', 'minimum', 'maximum',
]);

/**
 * What Google checks in a structured-output request: `responseSchema` only with `responseMimeType:
 * application/json`, not together with `responseJsonSchema`, and only `Schema` fields at every level
 * (an unknown one is the proto JSON parser's 400 "Unknown name … Cannot find field.").
 */
function schemaProblem(g: any): string | undefined {
  if (!g || (g.responseSchema === undefined && g.responseJsonSchema === undefined)) return undefined;
  if (g.responseSchema !== undefined && g.responseJsonSchema !== undefined) return 'responseSchema and responseJsonSchema cannot both be set.';
  if (g.responseMimeType !== 'application/json') return 'responseMimeType must be application/json when a response schema is set.';
  if (g.responseSchema === undefined) return undefined;
  const walk = (node: any, at: string): string | undefined => {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return `Invalid value at '${at}', expected a Schema object.`;
    for (const [k, v] of Object.entries(node)) {
      if (!GEMINI_SCHEMA_FIELDS.has(k)) return `Invalid JSON payload received. Unknown name "${k}" at '${at}': Cannot find field.`;
      if (k === 'properties') {
        for (const [i, p] of Object.values(v as object).entries()) {
          const problem = walk(p, `${at}.properties[${i}].value`);
          if (problem) return problem;
        }
      } else if (k === 'items') {
        const problem = walk(v, `${at}.items`);
        if (problem) return problem;
      } else if (k === 'anyOf') {
        for (const [i, p] of (v as unknown[]).entries()) {
          const problem = walk(p, `${at}.any_of[${i}]`);
          if (problem) return problem;
        }
      } else if (k === 'enum' && (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))) {
        return `Invalid value at '${at}.enum' (TYPE_STRING), ${JSON.stringify(v)}`;
      }
    }
    return undefined;
  };
  return walk(g.responseSchema, 'generation_config.response_schema');
}

function textOf(content: any): string {
  return (content?.parts ?? []).map((p: any) => p.text ?? '').join('');
}
