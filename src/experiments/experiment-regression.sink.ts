/**
 * Where a rolled-back experiment's regression goes (a rollback, manual or automatic, records a
 * regression for the candidate's (provider, model): docs/architecture.md "Regressions"). A port, so ExperimentsService does not depend on routing: ExperimentsModule binds it to
 * RegressionsService (`useExisting`), whose record also feeds routing's in-memory 7-day view.
 */
export abstract class ExperimentRegressionSink {
  abstract record(orgId: string, provider: string, model: string, reason: string, detail: Record<string, unknown>): Promise<void>;
}
