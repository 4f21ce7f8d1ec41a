import { useMemo, useState } from 'preact/hooks';
import { api } from '../api';
import { fmtInt, fmtPct } from '../format';
import { useAsync } from '../hooks';
import type { AdminProvider, AdminProvidersPage, BreakerTransition } from '../types';
import type { ChartMarker } from '../ui/Chart';
import { Loaded } from '../ui/states';
import { Table, type Column } from '../ui/Table';
import { Time } from '../ui/Time';

export type ProvidersAnswer = AdminProvider[];

/** Every provider (docs/api.md "Admin API", providers), with the organisation's traffic in [from, to]. */
export async function loadProviders(signal?: AbortSignal, window?: { from: Date; to: Date }): Promise<ProvidersAnswer> {
  const out: AdminProvider[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 20; i++) {
    const page: AdminProvidersPage = await api<AdminProvidersPage>('GET', '/v1/admin/providers', {
      query: { limit: 1000, cursor, from: window?.from.toISOString(), to: window?.to.toISOString() },
      signal,
    });
    out.push(...page.data);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return out;
}

/** Circuit-breaker openings within [from, to], as markers on the overview's time axis. */
export function breakerMarkers(providers: ProvidersAnswer, from: Date, to: Date): ChartMarker[] {
  const out: ChartMarker[] = [];
  for (const p of providers) {
    for (const t of p.transitions) {
      const at = Date.parse(t.at);
      if (t.to !== 'open' || at < from.getTime() || at > to.getTime()) continue;
      out.push({ t: at / 1000, color: '#d62728', label: `${p.id} breaker opened ${new Date(at).toLocaleString()}${t.cause ? ` (${causeText(t.cause)})` : ''}` });
    }
  }
  return out;
}

const causeText = (c: BreakerTransition['cause']): string => (c ? `${c.error}${c.status !== null ? ` ${c.status}` : ''}` : '');

export function BreakerBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`}>{state.replace('_', '-')}</span>;
}

const WINDOWS = [
  { id: '1h', label: 'last hour', ms: 3_600_000 },
  { id: '24h', label: 'last 24 hours', ms: 86_400_000 },
  { id: '7d', label: 'last 7 days', ms: 7 * 86_400_000 },
] as const;

/** Each provider's circuit breaker now, its recent transitions, and the organisation's calls to it. */
export function Providers() {
  const [windowId, setWindowId] = useState<(typeof WINDOWS)[number]['id']>('1h');
  const [selected, setSelected] = useState<string | null>(null);
  const state = useAsync(
    (signal) => {
      const to = new Date();
      return loadProviders(signal, { from: new Date(to.getTime() - WINDOWS.find((w) => w.id === windowId)!.ms), to });
    },
    [windowId],
  );
  const columns = useMemo<Column<AdminProvider>[]>(
    () => [
      {
        id: 'id',
        label: 'Provider',
        sort: (p) => p.id,
        render: (p) => (
          <button type="button" class="link" onClick={() => setSelected(p.id)} data-testid="open-provider">
            {p.id}
          </button>
        ),
      },
      { id: 'family', label: 'Family', sort: (p) => p.family, render: (p) => p.family },
      { id: 'state', label: 'Breaker', sort: (p) => p.breaker.state, render: (p) => <BreakerBadge state={p.breaker.state} /> },
      { id: 'open_until', label: 'Open until', sort: (p) => p.breaker.open_until, render: (p) => <Time iso={p.breaker.open_until} /> },
      { id: 'failures', label: 'Consecutive failures', numeric: true, sort: (p) => p.breaker.consecutive_failures, render: (p) => fmtInt(p.breaker.consecutive_failures) },
      { id: 'requests', label: 'Calls', numeric: true, sort: (p) => p.traffic.requests, render: (p) => fmtInt(p.traffic.requests), title: "The organisation's calls to it in the window" },
      { id: 'errors', label: 'Failed', numeric: true, sort: (p) => p.traffic.errors, render: (p) => fmtInt(p.traffic.errors) },
      { id: 'error_rate', label: 'Failure rate', numeric: true, sort: (p) => p.traffic.error_rate, render: (p) => fmtPct(p.traffic.error_rate) },
      { id: 'last', label: 'Last change', sort: (p) => p.transitions[0]?.at, render: (p) => <Time iso={p.transitions[0]?.at} /> },
    ],
    [],
  );
  return (
    <>
      <div class="section-head">
        <h1>Providers</h1>
        <label class="inline">
          Traffic of the
          <select value={windowId} onChange={(e) => setWindowId((e.target as HTMLSelectElement).value as typeof windowId)}>
            {WINDOWS.map((w) => (
              <option key={w.id} value={w.id}>
                {w.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <Loaded state={state} what="Loading providers">
        {(providers) => {
          const transitions = providers
            .flatMap((p) => p.transitions.map((t) => ({ ...t, provider: p.id })))
            .filter((t) => selected === null || t.provider === selected);
          return (
            <>
              <Table rows={providers} columns={columns} rowKey={(p) => p.id} label="Providers" testId="providers-table" selected={selected} empty="No provider is configured." />
              <section aria-labelledby="transitions">
                <div class="section-head">
                  <h2 id="transitions">Recent breaker transitions{selected ? ` of ${selected}` : ''}</h2>
                  {selected ? (
                    <button type="button" onClick={() => setSelected(null)}>
                      All providers
                    </button>
                  ) : null}
                </div>
                <Table
                  rows={transitions}
                  rowKey={(t) => `${t.provider}:${t.replica}:${t.at}:${t.to}`}
                  label="Breaker transitions"
                  testId="transitions-table"
                  initialSort={{ id: 'at', dir: 'desc' }}
                  empty="No transition recorded: every breaker has stayed closed."
                  columns={[
                    { id: 'at', label: 'When', sort: (t) => t.at, render: (t) => <Time iso={t.at} /> },
                    { id: 'provider', label: 'Provider', sort: (t) => t.provider, render: (t) => t.provider },
                    {
                      id: 'change',
                      label: 'Change',
                      sort: (t) => t.to,
                      render: (t) => (
                        <>
                          {t.from ? <BreakerBadge state={t.from} /> : '—'} → <BreakerBadge state={t.to} />
                        </>
                      ),
                    },
                    { id: 'cause', label: 'Failure that opened it', sort: (t) => causeText(t.cause), render: (t) => causeText(t.cause) || '—' },
                    { id: 'open_until', label: 'Open until', sort: (t) => t.open_until, render: (t) => <Time iso={t.open_until} /> },
                    { id: 'openings', label: 'Openings in a row', numeric: true, sort: (t) => t.openings, render: (t) => fmtInt(t.openings) },
                    { id: 'replica', label: 'Replica', sort: (t) => t.replica, render: (t) => <code>{t.replica}</code> },
                  ]}
                />
              </section>
            </>
          );
        }}
      </Loaded>
    </>
  );
}
