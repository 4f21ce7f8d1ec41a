import { api } from '../api';
import { useAsync } from '../hooks';
import type { ChartMarker } from '../ui/Chart';
import { Loaded } from '../ui/states';

/**
 * The providers resource (docs/api.md "Admin API", providers): breaker states and their recent
 * transitions. Its shape is filled in once the API serves it; until then the page shows the API's
 * own answer (a 404).
 */
export type ProvidersAnswer = { data: unknown[] };

export function loadProviders(signal?: AbortSignal): Promise<ProvidersAnswer> {
  return api<ProvidersAnswer>('GET', '/v1/admin/providers', { signal });
}

/** Circuit-breaker openings within [from, to], as markers on the overview's time axis. */
export function breakerMarkers(_answer: ProvidersAnswer, _from: Date, _to: Date): ChartMarker[] {
  return [];
}

export function Providers() {
  const state = useAsync((signal) => loadProviders(signal), []);
  return (
    <>
      <h1>Providers</h1>
      <Loaded state={state} what="Loading providers">
        {() => null}
      </Loaded>
    </>
  );
}
