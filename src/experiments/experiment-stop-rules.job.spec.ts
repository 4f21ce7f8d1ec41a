import pino from 'pino';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import type { ArmStats, ExperimentStats, ExperimentStatsRepository } from './experiment-stats.repository';
import { ExperimentStopRulesJob } from './experiment-stop-rules.job';
import type { ExperimentRecord } from './experiment.record';
import type { ExperimentsRepository } from './experiments.repository';
import type { ExperimentSummary, ExperimentsService } from './experiments.service';

function makeExperiment(id: string): ExperimentRecord {
  const at = new Date(Date.UTC(2025, 0, 1));
  return {
    id,
    orgId: 'acme',
    type: 'canary',
    status: 'active',
    trafficPct: 50,
    baseline: { provider: 'mock', model: 'base' },
    candidate: { provider: 'mock', model: 'cand' },
    stopRule: { minN: 2, maxRegression: 0.05 },
    summary: null,
    startedAt: at,
    endedAt: null,
    createdAt: at,
    createdByKeyId: 'k',
  };
}

const arm = (o: Partial<ArmStats> = {}): ArmStats => ({ feedbackSessions: 2, scoreMean: 0.8, usefulRate: 1, requests: 2, errors: 0, latencyP50Ms: 10, costMeanUsd: null, ...o });

/** The job's three collaborators, as in-memory fakes over a list of experiments and their stats. */
class World {
  active: ExperimentRecord[] = [];
  stats = new Map<string, ExperimentStats | Error>();
  listFails = false;
  /** Ids another replica ends first: the service then answers null. */
  endedElsewhere = new Set<string>();
  moves: Array<[string, string, ExperimentSummary | null, string?]> = [];

  repo = { listActive: async () => (this.listFails ? Promise.reject(new Error('down')) : this.active) };
  statsRepo = {
    armStats: async (e: ExperimentRecord) => {
      const s = this.stats.get(e.id);
      if (s instanceof Error) throw s;
      return s ?? { baseline: arm({ feedbackSessions: 0 }), candidate: arm({ feedbackSessions: 0 }) };
    },
  };
  service = {
    complete: async (id: string, summary: ExperimentSummary) => this.move(id, 'completed', summary),
    rollbackBySystem: async (id: string, reason: string, summary: ExperimentSummary | null = null) => this.move(id, 'rolled_back', summary, reason),
  };

  private move(id: string, status: string, summary: ExperimentSummary | null, reason?: string): ExperimentRecord | null {
    if (this.endedElsewhere.has(id)) return null;
    this.moves.push([id, status, summary, reason]);
    return { ...makeExperiment(id), status: status as ExperimentRecord['status'] };
  }

  job(intervalMs = 0): ExperimentStopRulesJob {
    const metrics = new MetricsService();
    return new ExperimentStopRulesJob(
      this.service as unknown as ExperimentsService,
      this.repo as unknown as ExperimentsRepository,
      this.statsRepo as unknown as ExperimentStatsRepository,
      metrics,
      new StoreFallback(metrics, { pino: pino({ level: 'silent' }) }),
      { intervalMs },
    );
  }
}

describe('ExperimentStopRulesJob', () => {
  it('one round: waits, completes, rolls back with the reason, and reports an experiment another replica ended', async () => {
    const w = new World();
    w.active = ['wait', 'good', 'bad', 'raced'].map(makeExperiment);
    w.stats.set('good', { baseline: arm(), candidate: arm({ scoreMean: 0.79 }) });
    w.stats.set('bad', { baseline: arm(), candidate: arm({ scoreMean: 0.5 }) });
    w.stats.set('raced', { baseline: arm(), candidate: arm() });
    w.endedElsewhere.add('raced');
    const out = await w.job().run();
    expect(out.map((o) => [o.experimentId, o.result])).toEqual([
      ['wait', 'waiting'],
      ['good', 'completed'],
      ['bad', 'rolled_back'],
      ['raced', 'ended_elsewhere'],
    ]);
    expect(w.moves.map(([id, status, summary, reason]) => [id, status, summary !== null, reason])).toEqual([
      ['good', 'completed', true, undefined],
      ['bad', 'rolled_back', true, 'stop_rule_regression'],
    ]);
  });

  it('never rejects: a failing experiment is reported and the others still run; a failing list skips the round', async () => {
    const w = new World();
    w.active = ['broken', 'good'].map(makeExperiment);
    w.stats.set('broken', new Error('statement timeout'));
    w.stats.set('good', { baseline: arm(), candidate: arm() });
    expect((await w.job().run()).map((o) => o.result)).toEqual(['failed', 'completed']);
    w.listFails = true;
    await expect(w.job().run()).resolves.toEqual([]);
  });

  it('runs on its interval after bootstrap and stops at shutdown', async () => {
    const w = new World();
    w.active = [makeExperiment('good')];
    w.stats.set('good', { baseline: arm(), candidate: arm() });
    const job = w.job(10);
    job.onApplicationBootstrap();
    await new Promise((r) => setTimeout(r, 60));
    await job.beforeApplicationShutdown();
    const moved = w.moves.length;
    expect(moved).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 40));
    expect(w.moves.length).toBe(moved);
  });
});
