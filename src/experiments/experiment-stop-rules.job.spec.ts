import { makeExperiment as kitExperiment, silentLogger, UnusedSql } from '../../test/support/kit';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { type ArmStats, type ExperimentStats, ExperimentStatsRepository } from './experiment-stats.repository';
import { ExperimentStopRulesJob } from './experiment-stop-rules.job';
import type { ExperimentRecord } from './experiment.record';
import { ExperimentsRepository } from './experiments.repository';
import type { ExperimentSummary, ExperimentsService } from './experiments.service';

const makeExperiment = (id: string): ExperimentRecord => kitExperiment({ id, stopRule: { minN: 2, maxRegression: 0.05 } });

const arm = (o: Partial<ArmStats> = {}): ArmStats => ({ feedbackSessions: 2, scoreMean: 0.8, usefulRate: 1, requests: 2, errors: 0, latencyP50Ms: 10, costMeanUsd: null, ...o });

/** The job's three collaborators, as in-memory fakes over a list of experiments and their stats. */
class World {
  active: ExperimentRecord[] = [];
  stats = new Map<string, ExperimentStats | Error>();
  listFails = false;
  /** Ids another replica ends first: the service then answers null. */
  endedElsewhere = new Set<string>();
  moves: Array<[string, string, ExperimentSummary | null, string?]> = [];

  repo = new ActiveExperiments(this);
  statsRepo = new ArmStatsOf(this);
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
      this.repo,
      this.statsRepo,
      metrics,
      new StoreFallback(metrics, silentLogger()),
      { intervalMs },
    );
  }
}

/** The repository's one read the job makes, over the world's list; no SQL is reached. */
class ActiveExperiments extends ExperimentsRepository {
  constructor(private readonly world: World) {
    super(new UnusedSql());
  }
  override async listActive(): Promise<ExperimentRecord[]> {
    if (this.world.listFails) throw new Error('down');
    return this.world.active;
  }
}

/** Each experiment's arms as the world sets them (no feedback when unset); an Error set for one is thrown. */
class ArmStatsOf extends ExperimentStatsRepository {
  constructor(private readonly world: World) {
    super(new UnusedSql());
  }
  override async armStats(e: Pick<ExperimentRecord, 'id'>): Promise<ExperimentStats> {
    const s = this.world.stats.get(e.id);
    if (s instanceof Error) throw s;
    return s ?? { baseline: arm({ feedbackSessions: 0 }), candidate: arm({ feedbackSessions: 0 }) };
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
