import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { Empty } from './states';

export interface Column<R> {
  id: string;
  label: string;
  /** The value the column sorts by (numbers numerically, strings by locale); absent = not sortable. */
  sort?: (row: R) => number | string | null | undefined;
  render: (row: R) => ComponentChildren;
  numeric?: boolean;
  /** Header tooltip. */
  title?: string;
}

export interface TableProps<R> {
  rows: readonly R[];
  columns: readonly Column<R>[];
  rowKey: (row: R) => string;
  label: string;
  pageSize?: number;
  initialSort?: { id: string; dir: 'asc' | 'desc' };
  empty?: ComponentChildren;
  testId?: string;
  selected?: string | null;
}

const cmp = (a: number | string | null | undefined, b: number | string | null | undefined): number => {
  const na = a === null || a === undefined || (typeof a === 'number' && Number.isNaN(a));
  const nb = b === null || b === undefined || (typeof b === 'number' && Number.isNaN(b));
  if (na || nb) return na === nb ? 0 : na ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
};

/**
 * Every table of the console: sortable by any column with a sort value (click or Enter on the
 * header's button; missing values last either way) and paged in the browser.
 */
export function Table<R>({ rows, columns, rowKey, label, pageSize = 20, initialSort, empty, testId, selected }: TableProps<R>) {
  const [sort, setSort] = useState(initialSort ?? null);
  const [page, setPage] = useState(0);
  const sorted = useMemo(() => {
    const col = sort && columns.find((c) => c.id === sort.id);
    if (!col?.sort) return rows;
    const by = col.sort;
    const dir = sort!.dir === 'asc' ? 1 : -1;
    return [...rows].sort((a, b) => {
      const va = by(a);
      const vb = by(b);
      const missing = (v: unknown) => v === null || v === undefined;
      // Missing values stay last in both directions.
      if (missing(va) || missing(vb)) return cmp(va, vb);
      return dir * cmp(va, vb);
    });
  }, [rows, columns, sort]);
  const pages = Math.max(1, Math.ceil(sorted.length / pageSize));
  useEffect(() => {
    if (page >= pages) setPage(pages - 1);
  }, [page, pages]);
  if (rows.length === 0) return <Empty>{empty ?? 'Nothing to show.'}</Empty>;
  const at = Math.min(page, pages - 1);
  const shown = sorted.slice(at * pageSize, at * pageSize + pageSize);
  const toggle = (id: string) => {
    setSort((s) => (s?.id === id ? { id, dir: s.dir === 'asc' ? 'desc' : 'asc' } : { id, dir: 'asc' }));
    setPage(0);
  };
  return (
    <div class="table-block">
      <div class="table-wrap">
        <table data-testid={testId}>
          <caption class="sr-only">{label}</caption>
          <thead>
            <tr>
              {columns.map((c) => {
                const active = sort?.id === c.id;
                const ariaSort = active ? (sort!.dir === 'asc' ? 'ascending' : 'descending') : undefined;
                return (
                  <th scope="col" key={c.id} class={c.numeric ? 'num' : undefined} aria-sort={ariaSort} title={c.title}>
                    {c.sort ? (
                      <button type="button" class="sort" data-column={c.id} onClick={() => toggle(c.id)}>
                        {c.label}
                        <span aria-hidden="true" class="arrow">
                          {active ? (sort!.dir === 'asc' ? '▲' : '▼') : '↕'}
                        </span>
                      </button>
                    ) : (
                      c.label
                    )}
                  </th>
                );
              })}
            </tr>
          </thead>
          <tbody>
            {shown.map((r) => {
              const key = rowKey(r);
              return (
                <tr key={key} data-key={key} class={selected === key ? 'selected' : undefined}>
                  {columns.map((c) => (
                    <td key={c.id} class={c.numeric ? 'num' : undefined} data-column={c.id}>
                      {c.render(r)}
                    </td>
                  ))}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      {sorted.length > pageSize ? (
        <nav class="pager" aria-label={`${label}: pages`}>
          <button type="button" disabled={at === 0} onClick={() => setPage(at - 1)}>
            Previous
          </button>
          <span aria-live="polite">
            {at * pageSize + 1}–{Math.min(sorted.length, (at + 1) * pageSize)} of {sorted.length}
          </span>
          <button type="button" disabled={at >= pages - 1} onClick={() => setPage(at + 1)}>
            Next
          </button>
        </nav>
      ) : null}
    </div>
  );
}
