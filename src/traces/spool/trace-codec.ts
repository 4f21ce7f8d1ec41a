import type { DecisionTrace } from '../decision-trace';

/*
 * A decision trace as one JSON record of the spool. A trace holds ids, names, numbers and codes, never
 * prompt or completion text (docs/architecture.md "No prompt text stored or logged"); the spool
 * writes no more than the analytics store would: scalar fields as they are, the nested lists cut
 * to the fields the repository stores (a failed attempt carrying an upstream message leaves it
 * behind), anything else that is an object dropped.
 */

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const strOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function candidates(v: unknown): DecisionTrace['candidates'] {
  if (!Array.isArray(v)) return null;
  return v.map((c) => ({ provider: String(c?.provider), model: String(c?.model), score: num(c?.score) }));
}

function filtered(v: unknown): DecisionTrace['filtered'] {
  if (!Array.isArray(v) || v.length === 0) return null;
  return v.map((f) => ({ provider: String(f?.provider), model: String(f?.model), reason: String(f?.reason) }));
}

function failedAttempts(v: unknown): DecisionTrace['failedAttempts'] {
  if (!Array.isArray(v) || v.length === 0) return null;
  return v.map((a) => ({ provider: String(a?.provider), model: String(a?.model), error: a?.error, status: num(a?.status) })) as DecisionTrace['failedAttempts'];
}

export function encodeTrace(t: DecisionTrace): Buffer {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t)) {
    if (k === 'candidates') out[k] = candidates(v);
    else if (k === 'failedAttempts') out[k] = failedAttempts(v);
    else if (k === 'filtered') out[k] = filtered(v);
    else if (v instanceof Date) out[k] = Number.isNaN(v.getTime()) ? null : v.toISOString();
    else if (v === null || typeof v === 'string' || typeof v === 'boolean') out[k] = v;
    else if (typeof v === 'number') out[k] = Number.isFinite(v) ? v : null;
  }
  return Buffer.from(JSON.stringify(out), 'utf8');
}

/** The trace back from its record; `createdAt` a Date again (an unreadable one becomes an invalid Date, which the repository stores as now). */
export function decodeTrace(payload: Buffer): DecisionTrace {
  const o = JSON.parse(payload.toString('utf8')) as Record<string, unknown>;
  return {
    ...o,
    candidates: candidates(o.candidates),
    failedAttempts: failedAttempts(o.failedAttempts),
    filtered: filtered(o.filtered),
    sessionId: strOrNull(o.sessionId),
    createdAt: new Date(typeof o.createdAt === 'string' ? o.createdAt : Number.NaN),
  } as unknown as DecisionTrace;
}
