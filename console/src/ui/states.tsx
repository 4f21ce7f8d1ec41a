import type { ComponentChildren } from 'preact';
import { ApiError } from '../api';

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="state loading" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="state empty">{children}</p>;
}

/** The API's own message (docs/api.md "Error body"), with its status and code for operators. */
export function ErrorBox({ error, testId }: { error: unknown; testId?: string }) {
  const e = error as Error;
  const api = e instanceof ApiError ? e : null;
  return (
    <div class="state error" role="alert" data-testid={testId ?? 'error'} data-status={api?.status} data-code={api?.code}>
      <strong>{api ? (api.status ? `${api.status} ${api.code}` : 'Network error') : 'Error'}</strong>
      <span class="error-message">{e?.message ?? String(error)}</span>
      {api?.param ? <span class="muted"> (field: {api.param})</span> : null}
    </div>
  );
}

/** The three states of a loaded value, then the value itself. */
export function Loaded<T>({ state, children, what }: { state: { data?: T; error?: Error; loading: boolean }; children: (data: T) => ComponentChildren; what?: string }) {
  if (state.error) return <ErrorBox error={state.error} />;
  if (state.data === undefined) return <Loading what={what} />;
  return <>{children(state.data)}</>;
}
