import type { FailedAttempt } from '../routing/dispatcher.service';

/**
 * What is recorded about one request (docs/architecture.md "No prompt text stored or logged"). Deliberately no prompt or completion text: the
 * type has no field that could carry it.
 */
export interface DecisionTrace {
  /**
   * Made when the trace is built (trace-id.ts): with `createdAt` it is the row's key, so writing the
   * same trace again (a retried batch, a replayed journal) stores it once.
   */
  id: number;
  requestId: string;
  orgId: string;
  apiKeyId: string;
  sessionId: string | null;
  /** `responses` is a chat request in the Responses API's wire format: the learning loop counts it as chat. */
  endpoint: 'chat' | 'responses' | 'embeddings';
  requestedModel: string;
  route: string | null;
  strategy: string | null;
  candidates: Array<{ provider: string; model: string; score: number | null }> | null;
  /**
   * Targets routing left out, and why (the reasons explain's `filtered` names: an open breaker, a
   * constraint, the firewall); the Admin API's trace detail shows them. Absent or null when none was.
   */
  filtered?: Array<{ provider: string; model: string; reason: string }> | null;
  selectedProvider: string | null;
  selectedModel: string | null;
  fallbackUsed: boolean;
  attempts: number;
  /**
   * Upstream calls that failed before the one that served or, when none served, all of them; null
   * when none failed. The learning loop counts each as a failed request of its target.
   */
  failedAttempts: readonly FailedAttempt[] | null;
  experimentId: string | null;
  experimentArm: string | null;
  status: number;
  errorCode: string | null;
  latencyMs: number;
  ttftMs: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  reasoningTokens: number | null;
  costUsd: number | null;
  finishReason: string | null;
  createdAt: Date;
}

/**
 * Where decision traces go: Postgres now, a column store is the planned adapter
 * (docs/architecture.md "Decision traces off the hot path"). `write` stores a whole batch or rejects.
 */
export abstract class DecisionTraceSink {
  abstract write(traces: readonly DecisionTrace[]): Promise<void>;
}
