import { useState } from 'preact/hooks';
import { api } from '../api';
import { fmtInt, fmtNum, fmtPct, pairName } from '../format';
import type { ExplainAnswer } from '../types';
import { Bars } from '../ui/Bars';
import { ErrorBox } from '../ui/states';
import { Table } from '../ui/Table';
import { Time } from '../ui/Time';

const DEFAULT_REQUEST = JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'Hello' }] }, null, 2);

/** A field that must hold JSON: parsed here so a typo is named before anything is sent. */
function parseJson(text: string, what: string, object: boolean): unknown {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new Error(`${what} is not valid JSON: ${(err as Error).message}`);
  }
  if (object && (v === null || typeof v !== 'object' || Array.isArray(v))) throw new Error(`${what} must be a JSON object.`);
  return v;
}

/**
 * The explain playground (docs/api.md "POST /v1/routing/explain"): a chat body and optional
 * headers in, the dry run's answer drawn. Nothing is dispatched, traced or counted by the gateway.
 */
export function Explain() {
  const [request, setRequest] = useState(DEFAULT_REQUEST);
  const [headers, setHeaders] = useState('');
  const [lang, setLang] = useState<'en' | 'pt'>('en');
  // The answer with the language it was asked in: the select may change before the next answer arrives.
  const [answer, setAnswer] = useState<{ a: ExplainAnswer; lang: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const run = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const body: Record<string, unknown> = { request: parseJson(request, 'The request', true) };
      if (headers.trim()) body.headers = parseJson(headers, 'The headers', true);
      const asked = lang;
      setAnswer({ a: await api<ExplainAnswer>('POST', '/v1/routing/explain', { body, headers: { 'accept-language': asked } }), lang: asked });
    } catch (err) {
      setAnswer(null);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <h1>Explain playground</h1>
      <form class="card explain-form" onSubmit={run} data-testid="explain-form">
        <label>
          Request body (a chat completions body)
          <textarea name="request" rows={8} spellcheck={false} value={request} onInput={(e) => setRequest((e.target as HTMLTextAreaElement).value)} />
        </label>
        <label>
          Headers (optional JSON object of strings, e.g. gateway-session-id)
          <textarea name="headers" rows={3} spellcheck={false} placeholder='{"gateway-session-id": "s-1"}' value={headers} onInput={(e) => setHeaders((e.target as HTMLTextAreaElement).value)} />
        </label>
        <div class="row">
          <label class="inline">
            Explanation language
            <select name="lang" value={lang} onChange={(e) => setLang((e.target as HTMLSelectElement).value as 'en' | 'pt')}>
              <option value="en">English</option>
              <option value="pt">Português</option>
            </select>
          </label>
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Explaining…' : 'Explain'}
          </button>
        </div>
      </form>
      {error ? <ErrorBox error={error} /> : null}
      {answer ? <ExplainResult a={answer.a} lang={answer.lang} /> : null}
    </>
  );
}

function ExplainResult({ a, lang }: { a: ExplainAnswer; lang: string }) {
  const max = Math.max(1, ...a.candidates.map((c) => c.score));
  const selected = (c: { provider: string; model: string }) => a.would_select !== null && a.would_select.provider === c.provider && a.would_select.model === c.model;
  return (
    <section class="card" aria-labelledby="explain-answer" data-testid="explain-result">
      <h2 id="explain-answer">Decision</h2>
      <blockquote class="explanation" lang={lang} data-testid="explanation" data-template={a.explanation.template_id}>
        {a.explanation.text}
        <footer class="muted small">template {a.explanation.template_id}</footer>
      </blockquote>
      <dl class="facts">
        <div>
          <dt>Would select</dt>
          <dd data-testid="would-select">{a.would_select ? pairName(a.would_select) : 'nothing'}</dd>
        </div>
        <div>
          <dt>Reason</dt>
          <dd>{a.reason}</dd>
        </div>
        <div>
          <dt>Strategy</dt>
          <dd data-testid="strategy">{a.strategy_id}</dd>
        </div>
        <div>
          <dt>Phase</dt>
          <dd>{a.phase ?? '—'}</dd>
        </div>
        <div>
          <dt>Confidence</dt>
          <dd data-testid="confidence" data-value={a.confidence ?? ''}>
            {a.confidence === null ? 'not stated' : fmtPct(a.confidence)}
            {a.confidence_reason ? <span class="muted"> ({a.confidence_reason})</span> : null}
          </dd>
        </div>
        <div>
          <dt>Exploration rate</dt>
          <dd>{fmtPct(a.exploration_rate_effective)}</dd>
        </div>
        <div>
          <dt>Shared-pool prior</dt>
          <dd>{a.used_shared_pool_prior ? 'used' : 'not used'}</dd>
        </div>
      </dl>
      {a.confidence !== null ? (
        <div class="confidence">
          <meter min={0} max={1} low={0.5} high={0.8} optimum={1} value={a.confidence} aria-label="Confidence" />
        </div>
      ) : null}
      <h3>Candidates</h3>
      {a.candidates.length ? (
        <Bars
          label="Candidates by score"
          testId="explain-candidates"
          max={max}
          bars={a.candidates.map((c) => ({
            key: pairName(c),
            label: pairName(c),
            value: c.score,
            text: fmtNum(c.score),
            tone: selected(c) ? 'selected' : undefined,
            note: selected(c) ? 'selected' : undefined,
          }))}
        />
      ) : (
        <p class="muted">No candidate.</p>
      )}
      <h3>Filtered</h3>
      <Table
        rows={a.filtered}
        rowKey={(f) => `${pairName(f)}:${f.reason}`}
        label="Filtered candidates"
        testId="explain-filtered"
        empty="Nothing was filtered."
        columns={[
          { id: 'pair', label: 'Target', sort: (f) => pairName(f), render: (f) => pairName(f) },
          { id: 'reason', label: 'Reason', sort: (f) => f.reason, render: (f) => f.reason },
          { id: 'score', label: 'Score', numeric: true, sort: (f) => f.score, render: (f) => fmtNum(f.score) },
        ]}
      />
      <h3>Evidence</h3>
      {a.evidence ? (
        <dl class="facts" data-testid="evidence">
          <div>
            <dt>Samples</dt>
            <dd>{fmtInt(a.evidence.samples)}</dd>
          </div>
          <div>
            <dt>Top-2 score gap</dt>
            <dd>{fmtNum(a.evidence.top2_score_gap)}</dd>
          </div>
          <div>
            <dt>Outcome variance</dt>
            <dd>{fmtNum(a.evidence.outcome_variance, 4)}</dd>
          </div>
          <div>
            <dt>Recent regressions</dt>
            <dd>{a.evidence.recent_regressions.kind === 'exact' ? a.evidence.recent_regressions.exact : `at least ${a.evidence.recent_regressions.at_least}`}</dd>
          </div>
          <div>
            <dt>Last regression</dt>
            <dd>
              <Time iso={a.evidence.last_regression_at} />
            </dd>
          </div>
        </dl>
      ) : (
        <p class="muted">No evidence: this strategy does not consult the learned scores.</p>
      )}
      {a.weights ? (
        <>
          <h3>Signal weights</h3>
          <dl class="facts">
            {Object.entries(a.weights).map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{fmtNum(v, 2)}</dd>
              </div>
            ))}
          </dl>
        </>
      ) : null}
    </section>
  );
}
