import { useMemo, useState } from 'preact/hooks';
import { api, type Page } from '../api';
import { DASH, fmtInt, fmtMs, fmtNum, fmtUsd, pairName } from '../format';
import { useAsync, usePagedList } from '../hooks';
import type { TraceDetail, TraceSummary } from '../types';
import { Bars } from '../ui/Bars';
import { ListFooter } from '../ui/ListFooter';
import { Loaded } from '../ui/states';
import { Table, type Column } from '../ui/Table';
import { Time } from '../ui/Time';

interface Filters {
  range: string;
  request_id: string;
  session_id: string;
  model: string;
  provider: string;
  status: string;
  error_code: string;
  experiment_id: string;
  arm: string;
}

const EMPTY: Filters = { range: '24h', request_id: '', session_id: '', model: '', provider: '', status: '', error_code: '', experiment_id: '', arm: '' };
const SPANS: Record<string, number> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 };

/** The API's query for the filters: the time range from now, the other fields as typed (empty = any). */
function queryOf(f: Filters, cursor: string | null): Record<string, string | null> {
  const to = new Date();
  const { range, ...rest } = f;
  return { from: new Date(to.getTime() - SPANS[range]).toISOString(), to: to.toISOString(), ...rest, cursor };
}

/**
 * Decision traces (docs/api.md "Admin API", traces): search by the API's filters (kept in the
 * page's state, never in the URL), and one trace's routing decision drawn.
 */
export function Traces() {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [selected, setSelected] = useState<string | null>(null);
  const list = usePagedList<TraceSummary>((cursor, signal) => api<Page<TraceSummary>>('GET', '/v1/admin/traces', { query: queryOf(filters, cursor), signal }), [filters]);
  const set = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  const columns = useMemo<Column<TraceSummary>[]>(
    () => [
      { id: 'time', label: 'When', sort: (t) => t.created_at, render: (t) => <Time iso={t.created_at} /> },
      {
        id: 'request',
        label: 'Request id',
        sort: (t) => t.request_id,
        render: (t) => (
          <button type="button" class="link" onClick={() => setSelected(t.id)} data-testid="open-trace" title={t.request_id}>
            {t.request_id.length > 18 ? `${t.request_id.slice(0, 18)}…` : t.request_id}
          </button>
        ),
      },
      { id: 'endpoint', label: 'Endpoint', sort: (t) => t.endpoint, render: (t) => t.endpoint },
      { id: 'model', label: 'Model asked', sort: (t) => t.requested_model, render: (t) => t.requested_model },
      { id: 'selected', label: 'Served by', sort: (t) => (t.selected ? pairName(t.selected) : null), render: (t) => (t.selected ? pairName(t.selected) : DASH) },
      { id: 'status', label: 'Status', numeric: true, sort: (t) => t.status, render: (t) => <span class={t.status >= 400 ? 'bad' : undefined}>{t.status}</span> },
      { id: 'error', label: 'Error', sort: (t) => t.error_code, render: (t) => t.error_code ?? '' },
      { id: 'attempts', label: 'Attempts', numeric: true, sort: (t) => t.attempts, render: (t) => `${t.attempts}${t.fallback_used ? ' (fallback)' : ''}` },
      { id: 'latency', label: 'Latency', numeric: true, sort: (t) => t.latency_ms, render: (t) => fmtMs(t.latency_ms) },
      { id: 'cost', label: 'Cost', numeric: true, sort: (t) => t.cost_usd, render: (t) => fmtUsd(t.cost_usd) },
    ],
    [],
  );
  return (
    <>
      <h1>Traces</h1>
      <form
        class="card grid-form filters"
        data-testid="trace-filters"
        onSubmit={(e) => {
          e.preventDefault();
          setSelected(null);
          setFilters({ ...draft });
        }}
      >
        <label>
          Range
          <select name="range" value={draft.range} onChange={set('range')}>
            <option value="1h">last hour</option>
            <option value="24h">last 24 hours</option>
            <option value="7d">last 7 days</option>
            <option value="30d">last 30 days</option>
          </select>
        </label>
        <label>
          Request id
          <input name="request_id" value={draft.request_id} onInput={set('request_id')} spellcheck={false} />
        </label>
        <label>
          Session id
          <input name="session_id" value={draft.session_id} onInput={set('session_id')} spellcheck={false} />
        </label>
        <label>
          Model
          <input name="model" value={draft.model} onInput={set('model')} spellcheck={false} />
        </label>
        <label>
          Provider
          <input name="provider" value={draft.provider} onInput={set('provider')} spellcheck={false} />
        </label>
        <label>
          Status (e.g. 502 or 5xx)
          <input name="status" value={draft.status} onInput={set('status')} spellcheck={false} />
        </label>
        <label>
          Error code
          <input name="error_code" value={draft.error_code} onInput={set('error_code')} spellcheck={false} />
        </label>
        <label>
          Experiment id
          <input name="experiment_id" value={draft.experiment_id} onInput={set('experiment_id')} spellcheck={false} />
        </label>
        <label>
          Arm
          <select name="arm" value={draft.arm} onChange={set('arm')}>
            <option value="">any</option>
            <option value="baseline">baseline</option>
            <option value="candidate">candidate</option>
            <option value="baseline_fallback">baseline_fallback</option>
            <option value="candidate_fallback">candidate_fallback</option>
          </select>
        </label>
        <div class="form-actions">
          <button type="submit" class="primary">
            Search
          </button>
          <button type="button" onClick={() => (setDraft(EMPTY), setFilters(EMPTY), setSelected(null))}>
            Clear
          </button>
        </div>
      </form>
      {list.rows.length || !list.loading ? <Table rows={list.rows} columns={columns} rowKey={(t) => t.id} label="Decision traces" testId="traces-table" selected={selected} empty="No trace matches." /> : null}
      <ListFooter list={list} what="traces" />
      {selected ? <TraceView key={selected} id={selected} onClose={() => setSelected(null)} /> : null}
    </>
  );
}

function TraceView({ id, onClose }: { id: string; onClose: () => void }) {
  const state = useAsync((signal) => api<TraceDetail>('GET', `/v1/admin/traces/${encodeURIComponent(id)}`, { signal }), [id]);
  return (
    <section class="card detail" aria-labelledby="trace-detail" data-testid="trace-detail">
      <div class="section-head">
        <h2 id="trace-detail">Trace</h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <Loaded state={state} what="Loading the trace">
        {(t) => <TraceBody t={t} />}
      </Loaded>
    </section>
  );
}

function TraceBody({ t }: { t: TraceDetail }) {
  const scores = t.candidates.map((c) => c.score ?? 0);
  const max = Math.max(1, ...scores);
  const served = (c: { provider: string; model: string }) => t.selected !== null && t.selected.provider === c.provider && t.selected.model === c.model;
  return (
    <>
      <dl class="facts" data-testid="trace-facts">
        <div>
          <dt>Request id</dt>
          <dd data-testid="trace-request-id">
            <code>{t.request_id}</code>
          </dd>
        </div>
        <div>
          <dt>When</dt>
          <dd>
            <Time iso={t.created_at} />
          </dd>
        </div>
        <div>
          <dt>Key</dt>
          <dd>{t.api_key_id}</dd>
        </div>
        <div>
          <dt>Session</dt>
          <dd>{t.session_id ?? DASH}</dd>
        </div>
        <div>
          <dt>Endpoint</dt>
          <dd>{t.endpoint}</dd>
        </div>
        <div>
          <dt>Model asked</dt>
          <dd>{t.requested_model}</dd>
        </div>
        <div>
          <dt>Route / strategy</dt>
          <dd>
            {t.route ?? DASH} / {t.strategy ?? DASH}
          </dd>
        </div>
        <div>
          <dt>Served by</dt>
          <dd data-testid="trace-selected">{t.selected ? pairName(t.selected) : 'nothing'}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd data-testid="trace-status">
            {t.status} {t.error_code ? <code>{t.error_code}</code> : null}
          </dd>
        </div>
        <div>
          <dt>Attempts</dt>
          <dd data-testid="trace-attempts" data-value={t.attempts}>
            {t.attempts}
            {t.fallback_used ? ' (fell back)' : ''}
          </dd>
        </div>
        <div>
          <dt>Latency / first token</dt>
          <dd data-testid="trace-latency" data-value={t.latency_ms}>
            {fmtMs(t.latency_ms)} / {fmtMs(t.ttft_ms)}
          </dd>
        </div>
        <div>
          <dt>Tokens (prompt / completion / reasoning)</dt>
          <dd data-testid="trace-tokens">
            {fmtInt(t.tokens.prompt)} / {fmtInt(t.tokens.completion)} / {fmtInt(t.tokens.reasoning)}
          </dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd data-testid="trace-cost" data-value={t.cost_usd ?? ''}>
            {fmtUsd(t.cost_usd)}
          </dd>
        </div>
        <div>
          <dt>Finish</dt>
          <dd>{t.finish_reason ?? DASH}</dd>
        </div>
        {t.experiment ? (
          <div>
            <dt>Experiment</dt>
            <dd>
              <code>{t.experiment.id.slice(0, 8)}</code> {t.experiment.arm ?? ''}
            </dd>
          </div>
        ) : null}
      </dl>
      <h3>Candidates</h3>
      {t.candidates.length && t.candidates.every((c) => c.score === null) ? <p class="muted small">The route's strategy does not score: the candidates in the order they would be tried.</p> : null}
      {t.candidates.length ? (
        <Bars
          label="Routing candidates by score"
          testId="trace-candidates"
          max={max}
          bars={t.candidates.map((c, i) => ({
            key: pairName(c),
            label: pairName(c),
            value: c.score ?? 0,
            // A strategy that does not score (direct, ordered) records the order alone.
            text: c.score === null ? `#${i + 1}` : fmtNum(c.score),
            tone: served(c) ? 'selected' : undefined,
            note: served(c) ? 'served' : undefined,
          }))}
        />
      ) : (
        <p class="muted">No candidates were recorded.</p>
      )}
      <h3>Filtered</h3>
      <Table
        rows={t.filtered}
        rowKey={(f) => `${pairName(f)}:${f.reason}`}
        label="Filtered candidates"
        testId="trace-filtered"
        empty="Nothing was filtered."
        columns={[
          { id: 'pair', label: 'Target', sort: (f) => pairName(f), render: (f) => pairName(f) },
          { id: 'reason', label: 'Reason', sort: (f) => f.reason, render: (f) => f.reason },
        ]}
      />
      <h3>Failed attempts</h3>
      <Table
        rows={t.failed_attempts}
        rowKey={(a) => `${pairName(a)}:${a.error}`}
        label="Failed attempts"
        testId="trace-failed"
        empty="No attempt failed."
        columns={[
          { id: 'pair', label: 'Target', sort: (a) => pairName(a), render: (a) => pairName(a) },
          { id: 'error', label: 'Failure', sort: (a) => a.error, render: (a) => a.error },
          { id: 'status', label: 'Upstream status', numeric: true, sort: (a) => a.status, render: (a) => (a.status === null ? DASH : a.status) },
        ]}
      />
    </>
  );
}
