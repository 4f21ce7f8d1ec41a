import { Module } from '@nestjs/common';
import { DecisionTraceSink } from './decision-trace';
import { DecisionTraceWriter } from './decision-trace.writer';
import { DecisionTracesRepository } from './decision-traces.repository';

/** Decision traces: a bounded batching writer in front of the trace sink (docs/architecture.md "Decision traces off the hot path"). */
@Module({
  providers: [DecisionTracesRepository, { provide: DecisionTraceSink, useExisting: DecisionTracesRepository }, DecisionTraceWriter],
  exports: [DecisionTraceWriter],
})
export class TracesModule {}
