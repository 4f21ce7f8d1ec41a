import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { SqlStore } from '../stores/sql/sql-store';
import { DecisionTraceSink } from './decision-trace';
import { DecisionTraceWriter, DecisionTraceWriterOptions } from './decision-trace.writer';
import { DecisionTracesRepository } from './decision-traces.repository';
import { traceSpoolConfig, TraceSpoolConfig } from './spool/trace-spool.config';

/**
 * Decision traces: a bounded batching writer in front of the trace sink (docs/architecture.md "Decision traces off the hot path"),
 * with the trace spool in the data dir for what the store cannot take (docs/operations.md "Store outages").
 */
@Module({
  providers: [
    DecisionTracesRepository,
    { provide: DecisionTraceSink, useExisting: DecisionTracesRepository },
    { provide: TraceSpoolConfig, useFactory: traceSpoolConfig, inject: [AppConfig, SqlStore] },
    // The defaults; a provider so that tests and benches can tune the buffer.
    { provide: DecisionTraceWriterOptions, useValue: {} },
    DecisionTraceWriter,
  ],
  exports: [DecisionTraceWriter],
})
export class TracesModule {}
