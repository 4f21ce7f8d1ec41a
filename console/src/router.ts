import { useEffect, useState } from 'preact/hooks';

/**
 * The console's pages, addressed by the URL's hash (#/experiments). The hash names a page only:
 * ids, filters and keys stay in the page's state, never in the URL (which lands in histories,
 * logs and Referer headers).
 */
export const PAGES = [
  { id: 'overview', title: 'Overview' },
  { id: 'models', title: 'Models' },
  { id: 'providers', title: 'Providers' },
  { id: 'experiments', title: 'Experiments' },
  { id: 'traces', title: 'Traces' },
  { id: 'explain', title: 'Explain' },
  { id: 'keys', title: 'Keys' },
] as const;

export type PageId = (typeof PAGES)[number]['id'];

function current(): PageId {
  const h = location.hash.replace(/^#\/?/, '');
  return (PAGES.find((p) => p.id === h)?.id ?? 'overview') as PageId;
}

export function useHashPage(): PageId {
  const [page, setPage] = useState<PageId>(current);
  useEffect(() => {
    const on = () => setPage(current());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return page;
}
