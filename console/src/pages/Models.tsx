import { useMemo, useState } from 'preact/hooks';
import { api } from '../api';
import { DASH, fmtInt, fmtMs, fmtNum, fmtPct, fmtUsd, pairName } from '../format';
import { usePagedList } from '../hooks';
import type { AdminModel, AdminModelsPage, ModelStats } from '../types';
import { ListFooter } from '../ui/ListFooter';
import { Table, type Column } from '../ui/Table';
import { Time } from '../ui/Time';

/** Net promoter score of the NPS buckets: promoters minus detractors, in points of 100. */
export function nps(s: ModelStats | null): number | null {
  if (!s) return null;
  const total = s.nps.detractors + s.nps.passives + s.nps.promoters;
  return total ? Math.round(((s.nps.promoters - s.nps.detractors) / total) * 100) : null;
}

/** The highest confidence explain states for the pair on any route the organisation has for it. */
const bestConfidence = (m: AdminModel): number | null => {
  const c = m.routes.map((r) => r.confidence).filter((x): x is number => x !== null);
  return c.length ? Math.max(...c) : null;
};

/**
 * What routing knows about each (provider, model) for the organisation, the shared pool beside it
 * (docs/api.md "Admin API", models): the learning snapshot's own figures and explain's confidence.
 */
export function Models() {
  const [refreshedAt, setRefreshedAt] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const list = usePagedList<AdminModel>(async (cursor, signal) => {
    const page = await api<AdminModelsPage>('GET', '/v1/admin/models', { query: { cursor, limit: 1000 }, signal });
    setRefreshedAt(page.stats_refreshed_at);
    return page;
  }, []);
  const columns = useMemo<Column<AdminModel>[]>(
    () => [
      {
        id: 'pair',
        label: 'Provider / model',
        sort: (m) => pairName(m),
        render: (m) => (
          <button type="button" class="link" onClick={() => setSelected(pairName(m))} data-testid="open-model">
            {pairName(m)}
          </button>
        ),
      },
      { id: 'type', label: 'Type', sort: (m) => m.type, render: (m) => m.type },
      { id: 'n', label: 'Samples', numeric: true, sort: (m) => m.stats?.n, render: (m) => fmtInt(m.stats?.n) },
      { id: 'requests', label: 'Requests', numeric: true, sort: (m) => m.stats?.requests, render: (m) => fmtInt(m.stats?.requests) },
      { id: 'outcome', label: 'Outcome', numeric: true, sort: (m) => m.stats?.outcome_mean, render: (m) => fmtNum(m.stats?.outcome_mean) },
      { id: 'nps', label: 'NPS', numeric: true, sort: (m) => nps(m.stats), render: (m) => fmtInt(nps(m.stats)) },
      { id: 'success', label: 'Success', numeric: true, sort: (m) => m.stats?.success_rate, render: (m) => fmtPct(m.stats?.success_rate) },
      { id: 'p50', label: 'p50', numeric: true, sort: (m) => m.stats?.latency_ms.p50, render: (m) => fmtMs(m.stats?.latency_ms.p50) },
      { id: 'cost', label: 'Mean cost', numeric: true, sort: (m) => m.stats?.cost_mean_usd, render: (m) => fmtUsd(m.stats?.cost_mean_usd) },
      { id: 'confidence', label: 'Confidence', numeric: true, sort: bestConfidence, render: (m) => fmtPct(bestConfidence(m)), title: 'The highest confidence explain states for it on a route' },
      { id: 'regressions', label: 'Regressions (7 d)', numeric: true, sort: (m) => m.regressions.count, render: (m) => fmtInt(m.regressions.count) },
      { id: 'pool_n', label: 'Pool samples', numeric: true, sort: (m) => m.pool?.n, render: (m) => fmtInt(m.pool?.n) },
      { id: 'pool_outcome', label: 'Pool outcome', numeric: true, sort: (m) => m.pool?.outcome_mean, render: (m) => fmtNum(m.pool?.outcome_mean) },
    ],
    [],
  );
  const current = list.rows.find((m) => pairName(m) === selected) ?? null;
  return (
    <>
      <h1>Models</h1>
      <p class="muted">
        The learning snapshot as of <Time iso={refreshedAt} />; the shared pool is every organisation's feedback, the prior routing borrows while this organisation has fewer samples.
      </p>
      {list.rows.length || !list.loading ? <Table rows={list.rows} columns={columns} rowKey={pairName} label="Models" testId="models-table" selected={selected} empty="No models in the catalogue." /> : null}
      <ListFooter list={list} what="models" />
      {current ? <ModelDetail m={current} onClose={() => setSelected(null)} /> : null}
    </>
  );
}

const STAT_ROWS: Array<{ id: string; label: string; value: (s: ModelStats) => string }> = [
  { id: 'n', label: 'Samples (sessions with feedback)', value: (s) => fmtInt(s.n) },
  { id: 'requests', label: 'Requests', value: (s) => fmtInt(s.requests) },
  { id: 'outcome', label: 'Outcome mean (variance)', value: (s) => `${fmtNum(s.outcome_mean)} (${fmtNum(s.outcome_variance, 4)})` },
  { id: 'score', label: 'Score mean (variance)', value: (s) => `${fmtNum(s.score_mean)} (${fmtNum(s.score_variance, 4)})` },
  { id: 'useful', label: 'Useful rate', value: (s) => fmtPct(s.useful_rate) },
  { id: 'nps', label: 'NPS: detractors / passives / promoters', value: (s) => `${fmtInt(s.nps.detractors)} / ${fmtInt(s.nps.passives)} / ${fmtInt(s.nps.promoters)} (NPS ${fmtInt(nps(s))})` },
  { id: 'success', label: 'Success rate', value: (s) => fmtPct(s.success_rate) },
  { id: 'latency', label: 'Latency p50 / p90 / p99', value: (s) => `${fmtMs(s.latency_ms.p50)} / ${fmtMs(s.latency_ms.p90)} / ${fmtMs(s.latency_ms.p99)}` },
  { id: 'cost', label: 'Mean cost', value: (s) => fmtUsd(s.cost_mean_usd) },
];

function ModelDetail({ m, onClose }: { m: AdminModel; onClose: () => void }) {
  return (
    <section class="card detail" aria-labelledby="model-detail" data-testid="model-detail">
      <div class="section-head">
        <h2 id="model-detail">{pairName(m)}</h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <dl class="facts">
        <div>
          <dt>Catalogue quality</dt>
          <dd>{fmtNum(m.catalogue.quality, 2)}</dd>
        </div>
        <div>
          <dt>Manual score</dt>
          <dd>{fmtNum(m.catalogue.manual_score, 2)}</dd>
        </div>
        <div>
          <dt>Price per M tokens (in / out)</dt>
          <dd>{m.catalogue.cost ? `$${m.catalogue.cost.input_per_mtok} / $${m.catalogue.cost.output_per_mtok}` : DASH}</dd>
        </div>
        <div>
          <dt>Regressions in 7 days</dt>
          <dd>
            {fmtInt(m.regressions.count)} {m.regressions.last_at ? <>(last <Time iso={m.regressions.last_at} />)</> : null}
          </dd>
        </div>
      </dl>
      <h3>Organisation and shared pool</h3>
      <div class="table-wrap">
        <table data-testid="model-stats">
          <caption class="sr-only">The organisation's figures beside the shared pool's</caption>
          <thead>
            <tr>
              <th scope="col">Figure</th>
              <th scope="col" class="num">
                Organisation
              </th>
              <th scope="col" class="num">
                Shared pool
              </th>
            </tr>
          </thead>
          <tbody>
            {STAT_ROWS.map((r) => (
              <tr key={r.id} data-row={r.id}>
                <th scope="row">{r.label}</th>
                <td class="num">{m.stats ? r.value(m.stats) : DASH}</td>
                <td class="num">{m.pool ? r.value(m.pool) : DASH}</td>
              </tr>
            ))}
            <tr>
              <th scope="row">Computed</th>
              <td class="num">
                <Time iso={m.stats?.computed_at} />
              </td>
              <td class="num">
                <Time iso={m.pool?.computed_at} />
              </td>
            </tr>
          </tbody>
        </table>
      </div>
      <h3>On each route</h3>
      <Table
        rows={m.routes}
        rowKey={(r) => r.route}
        label="Routes that list the model"
        empty="No route of this organisation lists it."
        columns={[
          { id: 'route', label: 'Route', sort: (r) => r.route, render: (r) => r.route },
          { id: 'strategy', label: 'Strategy', sort: (r) => r.strategy, render: (r) => r.strategy },
          { id: 'phase', label: 'Phase', sort: (r) => r.phase, render: (r) => r.phase ?? DASH },
          { id: 'rank', label: 'Rank', numeric: true, sort: (r) => r.rank, render: (r) => fmtInt(r.rank) },
          { id: 'score', label: 'Score', numeric: true, sort: (r) => r.score, render: (r) => fmtNum(r.score) },
          { id: 'confidence', label: 'Confidence', numeric: true, sort: (r) => r.confidence, render: (r) => (r.confidence === null ? DASH : `${fmtPct(r.confidence)}${r.confidence_reason ? ` (${r.confidence_reason})` : ''}`) },
          { id: 'selected', label: 'Picked first', sort: (r) => (r.would_select ? 1 : 0), render: (r) => (r.would_select ? 'yes' : 'no') },
          { id: 'filtered', label: 'Filtered', sort: (r) => r.filtered_reason, render: (r) => r.filtered_reason ?? DASH },
          { id: 'pool', label: 'Pool prior', sort: (r) => (r.used_shared_pool_prior ? 1 : 0), render: (r) => (r.used_shared_pool_prior ? 'used' : 'no') },
        ]}
      />
    </section>
  );
}
