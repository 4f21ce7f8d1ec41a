import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Async<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs `load` now and whenever `deps` change; a later run supersedes an earlier one still in
 * flight (its answer is dropped), so a slow answer never overwrites a newer one.
 */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true, error: undefined }));
    loadRef.current(ctl.signal).then(
      (data) => !ctl.signal.aborted && setState({ data, loading: false }),
      (error: Error) => !ctl.signal.aborted && setState({ error, loading: false }),
    );
    return () => ctl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

export interface PagedList<T> {
  rows: T[];
  error: Error | undefined;
  loading: boolean;
  hasMore: boolean;
  more: () => void;
  reload: () => void;
}

/**
 * An Admin API list read page by page (its opaque `next_cursor`): the first page on load and
 * whenever `deps` change, the next one on `more()`. Sorting and paging of what is loaded is the
 * table's.
 */
export function usePagedList<T>(fetchPage: (cursor: string | null, signal: AbortSignal) => Promise<{ data: T[]; next_cursor: string | null }>, deps: unknown[]): PagedList<T> {
  const [rows, setRows] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<Error | undefined>();
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;
  const ctlRef = useRef<AbortController | null>(null);
  const run = (after: string | null, append: boolean) => {
    ctlRef.current?.abort();
    const ctl = new AbortController();
    ctlRef.current = ctl;
    setLoading(true);
    setError(undefined);
    fetchRef.current(after, ctl.signal).then(
      (page) => {
        if (ctl.signal.aborted) return;
        setRows((r) => (append ? [...r, ...page.data] : page.data));
        setCursor(page.next_cursor);
        setLoading(false);
      },
      (err: Error) => {
        if (ctl.signal.aborted) return;
        setError(err);
        setLoading(false);
      },
    );
  };
  useEffect(() => {
    run(null, false);
    return () => ctlRef.current?.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return {
    rows,
    error,
    loading,
    hasMore: cursor !== null,
    more: () => cursor !== null && run(cursor, true),
    reload: () => setTick((t) => t + 1),
  };
}
