/**
 * What every answer of the gateway must look like, whatever the request: shared by the property
 * specs that throw hostile input at each endpoint. A check returns the problems it found (empty when
 * the answer is acceptable), so a spec can report every bad case of a run at once.
 */
export interface Reply {
  status: number;
  text: string;
  json: any;
  headers: Headers;
}

export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  /** Sent as JSON; `raw` wins when both are given. */
  body?: unknown;
  raw?: string;
}

export type Endpoint = 'chat' | 'responses' | 'embeddings' | 'explain' | 'feedback' | 'experiments-list' | 'experiments-create' | 'experiments-rollback' | 'health' | 'metrics';

/** A response read whole: its status, text, the JSON it parses to (undefined when it is not JSON), and headers. */
export async function readReply(res: Response): Promise<Reply> {
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

export async function send(base: string, r: RequestSpec): Promise<Reply> {
  const res = await fetch(base + r.path, {
    method: r.method,
    headers: r.headers,
    body: r.method === 'GET' ? undefined : (r.raw ?? (r.body === undefined ? undefined : JSON.stringify(r.body))),
  });
  return readReply(res);
}

const isObj = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The contract's error body: `{"error":{"type":"error","code":"…","message":"…"}}` (extra fields allowed). */
export function envelopeProblem(r: Reply): string | null {
  const e = r.json?.error;
  if (!isObj(e) || typeof e.code !== 'string' || typeof e.message !== 'string' || e.code === '' || e.message === '') {
    return `not the error envelope: ${r.text.slice(0, 200)}`;
  }
  // The one documented exception: embeddings' model_not_found keeps OpenAI's own body.
  if (e.type === 'invalid_request_error' && e.code === 'model_not_found' && e.param === 'model') return null;
  return e.type === 'error' ? null : `error.type is ${JSON.stringify(e.type)}, not "error"`;
}

function successProblem(endpoint: Endpoint, r: Reply, stream: boolean): string | null {
  const j = r.json;
  switch (endpoint) {
    case 'chat':
      if (stream) {
        if (!r.text.endsWith('data: [DONE]\n\n')) return `stream does not end with [DONE]: …${r.text.slice(-200)}`;
        for (const line of r.text.split('\n')) {
          if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
          const chunk = JSON.parse(line.slice(6));
          if (chunk.error) return `stream carries an error event: ${line.slice(0, 200)}`;
          if (chunk.object !== 'chat.completion.chunk' || !Array.isArray(chunk.choices)) return `not a chunk: ${line.slice(0, 200)}`;
        }
        return null;
      }
      return j?.object === 'chat.completion' && Array.isArray(j.choices) && j.choices.length > 0 && typeof j.model === 'string' ? null : 'not a chat.completion';
    case 'responses':
      if (stream) {
        // Ends in response.completed or response.incomplete; never response.failed without a cause (the mock does not fail here).
        const frames = r.text.split('\n\n').filter(Boolean);
        const last = frames[frames.length - 1] ?? '';
        if (!/^event: response\.(completed|incomplete)\n/.test(last)) return `stream does not end with response.completed: …${r.text.slice(-200)}`;
        let seq = 0;
        for (const frame of frames) {
          const [ev, data] = frame.split('\n');
          const e = JSON.parse(data.slice(6));
          if (ev !== `event: ${e.type}` || e.sequence_number !== seq++) return `bad event frame: ${frame.slice(0, 200)}`;
        }
        return null;
      }
      return j?.object === 'response' && Array.isArray(j.output) && typeof j.id === 'string' && typeof j.model === 'string' ? null : 'not a response';
    case 'embeddings':
      return j?.object === 'list' && Array.isArray(j.data) && j.data.length > 0 && typeof j.model === 'string' ? null : 'not an embeddings list';
    case 'explain':
      return j?.dry_run === true && Array.isArray(j.candidates) && Array.isArray(j.filtered) && 'would_select' in j && typeof j.reason === 'string'
        ? null
        : 'not an explain response';
    case 'feedback':
      return isObj(j) && Object.keys(j).length === 0 ? null : 'feedback answer is not {}';
    case 'experiments-list':
      return Array.isArray(j) ? null : 'not an array of experiments';
    case 'experiments-create':
    case 'experiments-rollback':
      return isObj(j) && typeof j.id === 'string' && typeof j.status === 'string' ? null : 'not an experiment record';
    case 'health':
      return isObj(j) ? null : 'health answer is not a JSON object';
    case 'metrics':
      return r.text.includes('# TYPE') ? null : 'not Prometheus text';
  }
}

/** Problems of one answer: a 5xx, a 4xx without the envelope, a 2xx without the endpoint's shape. */
export function replyProblems(endpoint: Endpoint, r: Reply, opts: { stream?: boolean } = {}): string[] {
  if (r.status >= 500) return [`status ${r.status}: ${r.text.slice(0, 200)}`];
  if (r.status >= 400) {
    const p = envelopeProblem(r);
    return p ? [`${r.status} ${p}`] : [];
  }
  if (r.status >= 200 && r.status < 300) {
    // A stream is only a stream when it was asked for and the answer says so.
    const stream = opts.stream === true && (r.headers.get('content-type') ?? '').startsWith('text/event-stream');
    try {
      const p = successProblem(endpoint, r, stream);
      return p ? [`${r.status} ${p}`] : [];
    } catch (err) {
      return [`${r.status} unreadable answer (${(err as Error).message})`];
    }
  }
  return [`unexpected status ${r.status}`];
}
