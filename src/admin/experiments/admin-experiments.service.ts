import { Injectable } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import type { Caller } from '../../common/http/request-context';
import { evaluateStopRule, QUALITY_FORMULA, summaryOf } from '../../experiments/experiment-quality';
import { ExperimentStatsRepository } from '../../experiments/experiment-stats.repository';
import type { ExperimentRecord, ExperimentStatus } from '../../experiments/experiment.record';
import { StoreFallback } from '../../resilience/store-fallback';
import { AdminQuery, DEFAULT_LIMIT } from '../common/admin-query';
import { fromAnalytics, type Page } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import { AdminExperimentsRepository } from './admin-experiments.repository';
import {
  AdminExperimentJson,
  ArmFiguresJson,
  ExperimentEventJson,
  StopRuleStateJson,
  toAdminExperimentJson,
  toArmFiguresJson,
  toEventJson,
  toStopRuleStateJson,
} from './admin-experiments.mapper';

/** The Experiments API's own 404 text: byte-identical for another organisation's, a missing and a malformed id. */
const NOT_FOUND_MESSAGE = 'No experiment with this id in the organisation.';
const STATUSES: readonly ExperimentStatus[] = ['draft', 'active', 'completed', 'rolled_back'];

export interface ExperimentDetailJson {
  experiment: AdminExperimentJson;
  /** The first page of lifecycle events, oldest first; the rest from GET …/events with `events_next_cursor`. */
  events: ExperimentEventJson[];
  events_next_cursor: string | null;
  arms: { baseline: ArmFiguresJson; candidate: ArmFiguresJson };
  stop_rule: StopRuleStateJson;
}

/**
 * Experiments for operators (docs/api.md "Admin API", experiments): the organisation's experiments
 * by status, and one experiment with its lifecycle events and live per-arm figures. The figures and
 * the verdict are the stop rules' own (ExperimentStatsRepository, experiment-quality.ts): nothing
 * here computes a quality.
 */
@Injectable()
export class AdminExperimentsService {
  constructor(
    private readonly experiments: AdminExperimentsRepository,
    private readonly stats: ExperimentStatsRepository,
    private readonly fallback: StoreFallback,
  ) {}

  async list(caller: Caller, rawQuery: unknown): Promise<Page<AdminExperimentJson>> {
    const q = AdminQuery.parse(rawQuery, ['status', 'limit', 'cursor']);
    const status = q.oneOf('status', STATUSES) ?? null;
    const { limit, cursor } = q.page();
    const scope = ['experiments', caller.orgId, status];
    const after = decodeCursor(cursor, scope, ['time', 'text'] as const);
    const rows = await fromAnalytics(this.fallback, 'experiments', () =>
      this.experiments.page(caller.orgId, after ? { position: after[0], id: after[1] } : null, status, limit + 1),
    );
    return pageOf(rows, limit, scope, (r) => [r.position, r.record.id], (r) => toAdminExperimentJson(r.record));
  }

  async get(caller: Caller, id: string, rawQuery: unknown): Promise<ExperimentDetailJson> {
    AdminQuery.parse(rawQuery, []);
    const record = await this.found(caller, id);
    const [events, stats] = await fromAnalytics(this.fallback, 'experiments', () =>
      Promise.all([this.experiments.events(caller.orgId, record.id, '0', DEFAULT_LIMIT + 1), this.stats.armStats(record)]),
    );
    const page = pageOf(events, DEFAULT_LIMIT, this.eventsScope(caller, record), (e) => [e.id], toEventJson);
    const baseline = summaryOf(record, 'baseline', stats.baseline);
    const candidate = summaryOf(record, 'candidate', stats.candidate);
    const atMinN: ExperimentRecord = { ...record, stopRule: { ...record.stopRule, minN: 0 } };
    return {
      experiment: toAdminExperimentJson(record),
      events: page.data,
      events_next_cursor: page.next_cursor,
      arms: { baseline: toArmFiguresJson(record, baseline), candidate: toArmFiguresJson(record, candidate) },
      stop_rule: toStopRuleStateJson(record, QUALITY_FORMULA[record.type], evaluateStopRule(record, stats), evaluateStopRule(atMinN, stats)),
    };
  }

  async events(caller: Caller, id: string, rawQuery: unknown): Promise<Page<ExperimentEventJson>> {
    const q = AdminQuery.parse(rawQuery, ['limit', 'cursor']);
    const { limit, cursor } = q.page();
    const record = await this.found(caller, id);
    const scope = this.eventsScope(caller, record);
    const after = decodeCursor(cursor, scope, ['int'] as const);
    const rows = await fromAnalytics(this.fallback, 'experiments', () => this.experiments.events(caller.orgId, record.id, after?.[0] ?? '0', limit + 1));
    return pageOf(rows, limit, scope, (e) => [e.id], toEventJson);
  }

  private eventsScope(caller: Caller, record: ExperimentRecord): unknown {
    return ['experiment-events', caller.orgId, record.id];
  }

  private async found(caller: Caller, id: string): Promise<ExperimentRecord> {
    const record = await fromAnalytics(this.fallback, 'experiments', () => this.experiments.find(caller.orgId, id));
    if (!record) throw new GatewayError('not_found', NOT_FOUND_MESSAGE);
    return record;
  }
}
