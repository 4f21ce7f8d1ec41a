import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Periodic } from '../../common/lifecycle/periodic';
import { AppConfig } from '../../config/app-config';
import { MetricsService } from '../../metrics/metrics.service';
import { StoreFallback } from '../../resilience/store-fallback';
import { RegressionsRepository } from './regressions.repository';
import { RegressionsSnapshotService } from './regressions-snapshot.service';
import type { RegressionRecord } from './regressions-view';

const DAY_SECONDS = 86_400;
/** How long shutdown waits for a detection under way. */
const SHUTDOWN_TIMEOUT_MS = 5_000;

/**
 * Records a `quality_drop` regression when a model's rolling quality falls below its long-run mean
 * by more than `routing.regressions.margin`. Runs on its own timer,
 * every `routing.regressions.check_seconds` (default 60 s: drops are judged over hours, so the
 * learning job's few-second beat would only repeat the same query). Every replica runs it; an
 * advisory lock lets one detect per beat, and the statement never records a pair twice while its last
 * drop is younger than the rolling window.
 */
@Injectable()
export class RegressionDetector implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly periodic = new Periodic(() => this.once());
  private readonly recorded: Counter;

  constructor(
    private readonly repo: RegressionsRepository,
    private readonly view: RegressionsSnapshotService,
    private readonly config: AppConfig,
    metrics: MetricsService,
    private readonly fallback: StoreFallback,
  ) {
    this.recorded = new Counter({
      name: 'gateway_routing_regressions_detected_total',
      help: 'Quality-drop regressions recorded by the detector',
      registers: [metrics.registry],
    });
  }

  onApplicationBootstrap(): void {
    this.periodic.start(this.config.gateway.routing.regressions.check_seconds * 1000);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.periodic.stop(SHUTDOWN_TIMEOUT_MS);
  }

  /**
   * One detection; never rejects. Returns what was recorded, `skipped` (another replica), or `failed`.
   * A call while a detection is under way waits for it and then detects again.
   */
  run(): Promise<RegressionRecord[] | 'skipped' | 'failed'> {
    return this.periodic.run();
  }

  private async once(): Promise<RegressionRecord[] | 'skipped' | 'failed'> {
    const { learning, routing } = this.config.gateway;
    const r = routing.regressions;
    try {
      const found = await this.repo.detectQualityDrops({
        longRunSeconds: learning.window_days * DAY_SECONDS,
        rollingSeconds: r.rolling_hours * 3600,
        weights: learning.weights,
        minSamples: r.min_samples,
        margin: r.margin,
      });
      if (found !== 'skipped') {
        for (const row of found) this.view.add(row);
        this.recorded.inc(found.length);
      }
      return found;
    } catch (err) {
      this.fallback.failed('analytics', 'routing:regression-detector', err, { effect: 'no regressions detected this beat' });
      return 'failed';
    }
  }
}
