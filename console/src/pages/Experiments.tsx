import { useMemo, useState } from 'preact/hooks';
import { api, type Page } from '../api';
import { fmtInt, fmtMs, fmtNum, fmtPct, fmtUsd, pairName } from '../format';
import { useAsync, usePagedList } from '../hooks';
import type { AdminModelsPage, ArmFigures, Experiment, ExperimentDetail, ExperimentEvent } from '../types';
import { Progress } from '../ui/Bars';
import { ConfirmDialog } from '../ui/Dialog';
import { ListFooter } from '../ui/ListFooter';
import { ErrorBox, Loaded, Loading } from '../ui/states';
import { Table, type Column } from '../ui/Table';
import { Time } from '../ui/Time';

/** The confirmation the contract asks of every experiment write (docs/api.md "POST /v1/experiments"). */
const CONFIRM = { 'x-gateway-confirm': 'experiments' };
const STATUSES = ['active', 'completed', 'rolled_back', 'draft'] as const;

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{status.replace('_', ' ')}</span>;
}

export function Experiments() {
  const [status, setStatus] = useState('');
  const [selected, setSelected] = useState<string | null>(null);
  const list = usePagedList<Experiment>(
    (cursor, signal) => api<Page<Experiment>>('GET', '/v1/admin/experiments', { query: { status, cursor }, signal }),
    [status],
  );
  const columns = useMemo<Column<Experiment>[]>(
    () => [
      {
        id: 'id',
        label: 'Experiment',
        sort: (e) => e.id,
        render: (e) => (
          <button type="button" class="link" onClick={() => setSelected(e.id)} data-testid="open-experiment" title={e.id}>
            {e.id.slice(0, 8)}
          </button>
        ),
      },
      { id: 'type', label: 'Type', sort: (e) => e.type, render: (e) => e.type },
      { id: 'status', label: 'Status', sort: (e) => e.status, render: (e) => <StatusBadge status={e.status} /> },
      { id: 'traffic', label: 'Traffic', numeric: true, sort: (e) => e.traffic_pct, render: (e) => `${fmtNum(e.traffic_pct, 0)}%` },
      { id: 'baseline', label: 'Baseline', sort: (e) => pairName(e.baseline), render: (e) => pairName(e.baseline) },
      { id: 'candidate', label: 'Candidate', sort: (e) => pairName(e.candidate), render: (e) => pairName(e.candidate) },
      { id: 'started', label: 'Started', sort: (e) => e.started_at, render: (e) => <Time iso={e.started_at} /> },
      { id: 'ended', label: 'Ended', sort: (e) => e.ended_at, render: (e) => <Time iso={e.ended_at} /> },
    ],
    [],
  );
  return (
    <>
      <h1>Experiments</h1>
      <section aria-labelledby="exp-list">
        <div class="section-head">
          <h2 id="exp-list">All experiments</h2>
          <label class="inline">
            Status
            <select value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)} data-testid="experiment-status-filter">
              <option value="">any</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s.replace('_', ' ')}
                </option>
              ))}
            </select>
          </label>
        </div>
        {list.rows.length || !list.loading ? (
          <Table rows={list.rows} columns={columns} rowKey={(e) => e.id} label="Experiments" testId="experiments-table" selected={selected} empty="No experiments yet." />
        ) : null}
        <ListFooter list={list} what="experiments" />
      </section>
      {selected ? <ExperimentView key={selected} id={selected} onChanged={list.reload} onClose={() => setSelected(null)} /> : null}
      <CreateExperiment
        onCreated={(id) => {
          list.reload();
          setSelected(id);
        }}
      />
    </>
  );
}

interface Draft {
  type: 'canary' | 'shadow';
  baseline: string;
  candidate: string;
  traffic_pct: string;
  max_regression: string;
  min_n: string;
}

const splitPair = (s: string) => {
  const i = s.indexOf('/');
  return i < 0 ? { provider: s, model: '' } : { provider: s.slice(0, i), model: s.slice(i + 1) };
};

/** A number field as sent: empty = left out (the API's default applies, or it names the missing field). */
const numberOrUndefined = (s: string): number | undefined => (s.trim() === '' ? undefined : Number(s));

function CreateExperiment({ onCreated }: { onCreated: (id: string) => void }) {
  const models = useAsync((signal) => api<AdminModelsPage>('GET', '/v1/admin/models', { query: { type: 'chat', limit: 1000 }, signal }), []);
  const pairs = useMemo(() => (models.data?.data ?? []).map(pairName), [models.data]);
  const [draft, setDraft] = useState<Draft>({ type: 'canary', baseline: '', candidate: '', traffic_pct: '10', max_regression: '', min_n: '' });
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const set = (k: keyof Draft) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  const body = () => {
    const stop: Record<string, number> = {};
    const maxRegression = numberOrUndefined(draft.max_regression);
    const minN = numberOrUndefined(draft.min_n);
    if (maxRegression !== undefined) stop.max_regression = maxRegression;
    if (minN !== undefined) stop.min_n = minN;
    return {
      type: draft.type,
      baseline: splitPair(draft.baseline || pairs[0] || ''),
      candidate: splitPair(draft.candidate || pairs[1] || pairs[0] || ''),
      traffic_pct: numberOrUndefined(draft.traffic_pct),
      ...(Object.keys(stop).length ? { stop_rule: stop } : {}),
    };
  };
  const create = async () => {
    setBusy(true);
    setError(null);
    try {
      const created = await api<Experiment>('POST', '/v1/experiments', { body: body(), headers: CONFIRM });
      setConfirming(false);
      setDraft({ ...draft, max_regression: '', min_n: '' });
      onCreated(created.id);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const b = body();
  return (
    <section aria-labelledby="exp-create" class="card">
      <h2 id="exp-create">New experiment</h2>
      {models.error ? <ErrorBox error={models.error} /> : null}
      <form
        class="grid-form"
        data-testid="experiment-form"
        onSubmit={(e) => {
          e.preventDefault();
          setError(null);
          setConfirming(true);
        }}
      >
        <label>
          Type
          <select name="type" value={draft.type} onChange={set('type')}>
            <option value="canary">canary: the candidate serves a share</option>
            <option value="shadow">shadow: the candidate gets a copy</option>
          </select>
        </label>
        <label>
          Baseline
          <select name="baseline" value={draft.baseline || pairs[0]} onChange={set('baseline')} disabled={!pairs.length}>
            {pairs.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Candidate
          <select name="candidate" value={draft.candidate || pairs[1] || pairs[0]} onChange={set('candidate')} disabled={!pairs.length}>
            {pairs.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Traffic (% of sessions)
          <input name="traffic_pct" type="number" inputMode="decimal" step="any" value={draft.traffic_pct} onInput={set('traffic_pct')} />
        </label>
        <label>
          Stop rule: max regression
          <input name="max_regression" type="number" inputMode="decimal" step="any" placeholder="0.05 (default)" value={draft.max_regression} onInput={set('max_regression')} />
        </label>
        <label>
          Stop rule: min samples per arm
          <input name="min_n" type="number" inputMode="numeric" step="1" placeholder="100 (default)" value={draft.min_n} onInput={set('min_n')} />
        </label>
        <div class="form-actions">
          <button type="submit" class="primary" disabled={!pairs.length}>
            Create…
          </button>
        </div>
      </form>
      <ConfirmDialog
        open={confirming}
        title="Start this experiment?"
        confirmLabel="Start experiment"
        busy={busy}
        error={error}
        testId="confirm-create"
        onConfirm={create}
        onCancel={() => setConfirming(false)}
      >
        <p>
          A <strong>{b.type}</strong> experiment: <code>{pairName(b.candidate)}</code> against <code>{pairName(b.baseline)}</code> on{' '}
          <strong>{b.traffic_pct === undefined ? '?' : b.traffic_pct}%</strong> of sessions, starting now.
        </p>
        <p>
          Stop rule: min {b.stop_rule?.min_n ?? 100} samples per arm, max regression {b.stop_rule?.max_regression ?? 0.05}.
        </p>
      </ConfirmDialog>
    </section>
  );
}

function ExperimentView({ id, onChanged, onClose }: { id: string; onChanged: () => void; onClose: () => void }) {
  const detail = useAsync((signal) => api<ExperimentDetail>('GET', `/v1/admin/experiments/${encodeURIComponent(id)}`, { signal }), [id]);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const rollback = async () => {
    setBusy(true);
    setError(null);
    try {
      await api<Experiment>('POST', `/v1/experiments/${encodeURIComponent(id)}/rollback`, { headers: CONFIRM });
      setConfirming(false);
      detail.reload();
      onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="exp-detail" class="card detail" data-testid="experiment-detail" data-id={id}>
      <div class="section-head">
        <h2 id="exp-detail">
          Experiment <code>{id}</code>
        </h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <Loaded state={detail} what="Loading the experiment">
        {(d) => (
          <>
            <dl class="facts">
              <div>
                <dt>Status</dt>
                <dd data-testid="experiment-status">
                  <StatusBadge status={d.experiment.status} />
                </dd>
              </div>
              <div>
                <dt>Type</dt>
                <dd>{d.experiment.type}</dd>
              </div>
              <div>
                <dt>Traffic</dt>
                <dd>{fmtNum(d.experiment.traffic_pct, 0)}%</dd>
              </div>
              <div>
                <dt>Started</dt>
                <dd>
                  <Time iso={d.experiment.started_at} />
                </dd>
              </div>
              <div>
                <dt>Ended</dt>
                <dd>
                  <Time iso={d.experiment.ended_at} />
                </dd>
              </div>
              <div>
                <dt>Created by key</dt>
                <dd>{d.experiment.created_by_key_id ?? 'system'}</dd>
              </div>
            </dl>
            {d.experiment.status === 'active' || d.experiment.status === 'draft' ? (
              <button type="button" class="danger" onClick={() => (setError(null), setConfirming(true))} data-testid="rollback">
                Roll back…
              </button>
            ) : null}
            <ConfirmDialog
              open={confirming}
              title="Roll this experiment back?"
              confirmLabel="Roll back"
              danger
              busy={busy}
              error={error}
              testId="confirm-rollback"
              onConfirm={rollback}
              onCancel={() => setConfirming(false)}
            >
              <p>
                All traffic returns to <code>{pairName(d.experiment.baseline)}</code> on every replica's next request, and a regression is recorded for <code>{pairName(d.experiment.candidate)}</code>.
              </p>
            </ConfirmDialog>
            <StopRule d={d} />
            <Arms d={d} />
            <Timeline key={d.events.map((e) => e.id).join(',')} id={id} first={d.events} next={d.events_next_cursor} />
          </>
        )}
      </Loaded>
    </section>
  );
}

function StopRule({ d }: { d: ExperimentDetail }) {
  const s = d.stop_rule;
  const gap = s.quality_gap;
  return (
    <section aria-labelledby="stop-rule" data-testid="stop-rule" data-verdict={s.verdict}>
      <h3 id="stop-rule">Stop rule</h3>
      <p class="muted">
        <code>{s.formula}</code>
      </p>
      <div class="two">
        {(['baseline', 'candidate'] as const).map((arm) => (
          <div key={arm}>
            <h4>{arm} samples</h4>
            <Progress value={d.arms[arm].samples} max={s.min_n} label={`${arm} samples against min_n`} testId={`progress-${arm}`} />
          </div>
        ))}
      </div>
      <div class="gap" data-testid="quality-gap" data-value={gap ?? ''} data-max={s.max_regression}>
        <h4>Quality gap (baseline − candidate) against max regression</h4>
        <div class="gauge" role="img" aria-label={`quality gap ${gap === null ? 'unknown' : fmtNum(gap)} against ${fmtNum(s.max_regression)}`}>
          <span class="gauge-limit" style={{ left: `${Math.min(100, (s.max_regression / Math.max(s.max_regression * 2, Math.abs(gap ?? 0))) * 100)}%` }} />
          {gap !== null ? (
            <span
              class={`gauge-fill ${gap > s.max_regression ? 'over' : ''}`}
              style={{ width: `${Math.min(100, (Math.max(0, gap) / Math.max(s.max_regression * 2, Math.abs(gap))) * 100)}%` }}
            />
          ) : null}
        </div>
        <p>
          {gap === null ? 'No quality yet for one arm' : `${fmtNum(gap)} (rolls back above ${fmtNum(s.max_regression)})`}. Verdict now: <strong data-testid="verdict">{s.verdict}</strong>
          {s.verdict_at_min_n ? `; on the gap alone: ${s.verdict_at_min_n}` : ''}.
        </p>
      </div>
    </section>
  );
}

const ARM_ROWS: Array<{ id: string; label: string; value: (a: ArmFigures) => string; raw?: (a: ArmFigures) => number | null }> = [
  { id: 'pair', label: 'Target', value: (a) => pairName(a) },
  { id: 'samples', label: 'Samples', value: (a) => fmtInt(a.samples), raw: (a) => a.samples },
  { id: 'samples_to_min_n', label: 'Samples to min_n', value: (a) => fmtInt(a.samples_to_min_n), raw: (a) => a.samples_to_min_n },
  { id: 'requests', label: 'Requests', value: (a) => fmtInt(a.requests), raw: (a) => a.requests },
  { id: 'quality', label: 'Quality', value: (a) => fmtNum(a.quality), raw: (a) => a.quality },
  { id: 'mean_score', label: 'Mean score (0–10)', value: (a) => fmtNum(a.mean_score, 2), raw: (a) => a.mean_score },
  { id: 'useful_rate', label: 'Useful rate', value: (a) => fmtPct(a.useful_rate), raw: (a) => a.useful_rate },
  { id: 'success_rate', label: 'Success rate', value: (a) => fmtPct(a.quality_parts.success_rate), raw: (a) => a.quality_parts.success_rate },
  { id: 'error_rate', label: 'Error rate', value: (a) => fmtPct(a.error_rate), raw: (a) => a.error_rate },
  { id: 'p50_latency_ms', label: 'Latency p50', value: (a) => fmtMs(a.p50_latency_ms), raw: (a) => a.p50_latency_ms },
  { id: 'mean_cost_usd', label: 'Mean cost', value: (a) => fmtUsd(a.mean_cost_usd), raw: (a) => a.mean_cost_usd },
];

function Arms({ d }: { d: ExperimentDetail }) {
  return (
    <section aria-labelledby="arms">
      <h3 id="arms">Arms side by side</h3>
      <div class="table-wrap">
        <table data-testid="arms">
          <caption class="sr-only">Per-arm figures</caption>
          <thead>
            <tr>
              <th scope="col">Figure</th>
              <th scope="col" class="num">
                Baseline
              </th>
              <th scope="col" class="num">
                Candidate
              </th>
            </tr>
          </thead>
          <tbody>
            {ARM_ROWS.map((r) => (
              <tr key={r.id} data-row={r.id}>
                <th scope="row">{r.label}</th>
                {(['baseline', 'candidate'] as const).map((arm) => (
                  <td key={arm} class="num" data-arm={arm} data-value={r.raw ? (r.raw(d.arms[arm]) ?? '') : undefined}>
                    {r.value(d.arms[arm])}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function describeDetail(detail: Record<string, unknown> | null): string {
  if (!detail) return '';
  return Object.entries(detail)
    .filter(([k]) => k !== 'actor')
    .map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(', ');
}

function Timeline({ id, first, next }: { id: string; first: ExperimentEvent[]; next: string | null }) {
  const [events, setEvents] = useState(first);
  const [cursor, setCursor] = useState(next);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);
  const more = async () => {
    setLoading(true);
    try {
      const page = await api<Page<ExperimentEvent>>('GET', `/v1/admin/experiments/${encodeURIComponent(id)}/events`, { query: { cursor } });
      setEvents((e) => [...e, ...page.data]);
      setCursor(page.next_cursor);
    } catch (err) {
      setError(err);
    } finally {
      setLoading(false);
    }
  };
  return (
    <section aria-labelledby="timeline">
      <h3 id="timeline">Lifecycle</h3>
      <ol class="timeline" data-testid="timeline">
        {events.map((e) => (
          <li key={e.id} data-kind={e.kind} data-actor={e.actor}>
            <span class={`dot kind-${e.kind}`} aria-hidden="true" />
            <strong>{e.kind.replace('_', ' ')}</strong> <Time iso={e.created_at} />{' '}
            <span class="muted">by {e.actor === 'system' ? 'the system' : `key ${e.actor_api_key_id}`}</span>
            {e.detail ? <div class="muted small">{describeDetail(e.detail)}</div> : null}
          </li>
        ))}
      </ol>
      {error ? <ErrorBox error={error} /> : null}
      {loading ? <Loading what="Loading events" /> : null}
      {cursor && !loading ? (
        <button type="button" onClick={more}>
          Load more events
        </button>
      ) : null}
    </section>
  );
}
