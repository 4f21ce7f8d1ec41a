import { Injectable } from '@nestjs/common';
import { SqlStore } from '../../stores/sql/sql-store';

/** One provider's traffic in a window, for the caller's organisation. */
export interface ProviderTraffic {
  provider: string;
  /** Calls that reached the provider: requests it served or failed, plus failed attempts before a fallback. */
  requests: number;
  /** Of those, its failures: 5xx answers and failed attempts (the fallback triggers its breaker counts). */
  errors: number;
}

/*
 * Per provider, the organisation's calls in [$2, $3) (a created_at range: only those days'
 * partitions are read). A request that fell back counts once for each provider that failed it
 * (decision_traces.failed_attempts) and once for the one that served.
 */
const TRAFFIC = `
  WITH t AS (
    SELECT selected_provider, status, failed_attempts FROM decision_traces
    WHERE org_id = $1 AND created_at >= $2::timestamptz AND created_at < $3::timestamptz
  )
  SELECT provider, sum(requests)::bigint::text AS requests, sum(errors)::bigint::text AS errors FROM (
    SELECT selected_provider AS provider, count(*) AS requests, count(*) FILTER (WHERE status >= 500) AS errors
    FROM t WHERE selected_provider IS NOT NULL GROUP BY 1
    UNION ALL
    SELECT a ->> 'provider', count(*), count(*)
    FROM t CROSS JOIN LATERAL jsonb_array_elements(t.failed_attempts) AS a
    WHERE jsonb_typeof(t.failed_attempts) = 'array' GROUP BY 1
  ) x
  WHERE provider IS NOT NULL
  GROUP BY provider`;

/** The Admin API's read of provider traffic (`decision_traces`). */
@Injectable()
export class AdminProvidersRepository {
  constructor(private readonly sql: SqlStore) {}

  async traffic(orgId: string, from: Date, to: Date): Promise<ProviderTraffic[]> {
    const { rows } = await this.sql.query<{ provider: string; requests: string; errors: string }>(TRAFFIC, [orgId, from.toISOString(), to.toISOString()]);
    return rows.map((r) => ({ provider: r.provider, requests: Number(r.requests), errors: Number(r.errors) }));
  }
}
