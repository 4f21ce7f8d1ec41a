import type { PagedList } from '../hooks';
import { ErrorBox, Loading } from './states';

/** Below a paged list: its error, its loading state, or the button that reads the next page. */
export function ListFooter<T>({ list, what }: { list: PagedList<T>; what: string }) {
  if (list.error) return <ErrorBox error={list.error} />;
  if (list.loading) return <Loading what={`Loading ${what}`} />;
  if (!list.hasMore) return null;
  return (
    <button type="button" onClick={list.more} class="more">
      Load more {what}
    </button>
  );
}
