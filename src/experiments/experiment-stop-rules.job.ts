import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Periodic } from '../common/lifecycle/periodic';
import { stripUndefined } from '../common/options';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { evaluateStopRule, type StopVerdict } from './experiment-quality';
import { ExperimentStatsRepository } from './experiment-stats.repository';
import { ExperimentsRepository } from './experiments.repository';
import { ExperimentsService } from './experiments.service';

export class ExperimentStopRulesOptions {
  /** How often the job looks at every active experiment; 0 turns the timer off (run() still works). */
  intervalMs?: number;
  /** How long shutdown waits for a round in progress. */
  shutdownTimeoutMs?: number;
}

const DEFAULTS = { intervalMs: 10_000, shutdownTimeoutMs: 5_000 };

/** `rollback_reason` of an automatic rollback (event detail `reason`). */
export const STOP_RULE_ROLLBACK_REASON = 'stop_rule_regression';

/**
 * What one round did with one experiment: `waiting` (an arm below min_n), `completed`/`rolled_back`
 * (this replica made the move), `ended_elsewhere` (the verdict was reached but the experiment had
 * already left `active`, e.g. another replica moved it first), `failed` (a store error; next round).
 */
export interface StopRuleOutcome {
  experimentId: string;
  result: 'waiting' | 'completed' | 'rolled_back' | 'ended_elsewhere' | 'failed';
  verdict?: StopVerdict;
}

/**
 * The stop rules (docs/architecture.md "Stop rules"): every `intervalMs`, each active experiment's per-arm quality
 * is computed from its traces and feedback (experiment-quality.ts has the formula); once both arms
 * have `min_n` samples it is rolled back (actor system, regression recorded for the candidate) or
 * completed with its summary. Every replica runs it: the transitions lock the row and act only on an
 * active experiment, so exactly one replica moves it and the others find it ended.
 */
@Injectable()
export class ExperimentStopRulesJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly rounds: Counter<'result'>;
  private readonly periodic = new Periodic(() => this.round());

  constructor(
    private readonly experiments: ExperimentsService,
    private readonly repo: ExperimentsRepository,
    private readonly stats: ExperimentStatsRepository,
    metrics: MetricsService,
    private readonly fallback: StoreFallback,
    @Optional() options?: ExperimentStopRulesOptions,
  ) {
    this.o = { ...DEFAULTS, ...stripUndefined(options) };
    this.rounds = new Counter({
      name: 'gateway_experiment_stop_rule_results_total',
      help: 'Stop-rule evaluations of active experiments by result',
      labelNames: ['result'] as const,
      registers: [metrics.registry],
    });
  }

  onApplicationBootstrap(): void {
    this.periodic.start(this.o.intervalMs);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.periodic.stop(this.o.shutdownTimeoutMs);
  }

  /** One round over every active experiment; never rejects. A call during a round waits for it and runs another. */
  run(): Promise<StopRuleOutcome[]> {
    return this.periodic.run();
  }

  private async round(): Promise<StopRuleOutcome[]> {
    let active;
    try {
      active = await this.repo.listActive();
    } catch (err) {
      this.fallback.failed('analytics', 'experiments:stop-rules', err, { effect: 'round skipped' });
      return [];
    }
    const outcomes: StopRuleOutcome[] = [];
    for (const e of active) {
      let outcome: StopRuleOutcome;
      try {
        const verdict = evaluateStopRule(e, await this.stats.armStats(e));
        outcome = { experimentId: e.id, result: 'waiting', verdict };
        if (verdict.action === 'complete') {
          outcome.result = (await this.experiments.complete(e.id, verdict.summary)) ? 'completed' : 'ended_elsewhere';
        } else if (verdict.action === 'rollback') {
          outcome.result = (await this.experiments.rollbackBySystem(e.id, STOP_RULE_ROLLBACK_REASON, verdict.summary)) ? 'rolled_back' : 'ended_elsewhere';
        }
      } catch (err) {
        this.fallback.failed('analytics', 'experiments:stop-rules', err, { experiment_id: e.id, effect: 'evaluated again next round' });
        outcome = { experimentId: e.id, result: 'failed' };
      }
      this.rounds.inc({ result: outcome.result });
      outcomes.push(outcome);
    }
    return outcomes;
  }
}
