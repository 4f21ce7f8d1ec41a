import type { ExperimentRecord, ExperimentStatus, ExperimentType } from './experiment.record';

/** The contract's Experiment resource, field for field; `stop_rule` is accepted at creation only and never returned. */
export interface ExperimentJson {
  id: string;
  type: ExperimentType;
  status: ExperimentStatus;
  traffic_pct: number;
  baseline: { provider: string; model: string };
  candidate: { provider: string; model: string };
  started_at: string | null;
  ended_at: string | null;
  summary: Record<string, unknown> | null;
}

/** ISO 8601 in UTC. */
const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

export function toExperimentJson(r: ExperimentRecord): ExperimentJson {
  return {
    id: r.id,
    type: r.type,
    status: r.status,
    traffic_pct: r.trafficPct,
    baseline: { provider: r.baseline.provider, model: r.baseline.model },
    candidate: { provider: r.candidate.provider, model: r.candidate.model },
    started_at: iso(r.startedAt),
    ended_at: iso(r.endedAt),
    summary: r.summary,
  };
}
