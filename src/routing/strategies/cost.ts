import { ownValue } from '../../common/own-key';
import type { ModelSpec, TargetRef } from '../../config/gateway-config';
import type { ChatMessage } from '../../providers/provider-adapter';

/** Tokens a request is expected to use, before it is sent (`smart_cost`, `max_cost_increase`). */
export interface TokenEstimate {
  input: number;
  output: number;
}

/**
 * Input: characters of the message text (string contents and text parts, template messages
 * included) / 4, rounded up — the usual rule of thumb for English with BPE tokenisers. Output: the
 * request's `max_completion_tokens` (its upper bound), else `routing.smart_cost.default_output_tokens`.
 */
export function estimateTokens(messages: readonly ChatMessage[], maxCompletionTokens: number | undefined, defaultOutput: number): TokenEstimate {
  let chars = 0;
  for (const m of messages) {
    if (typeof m.content === 'string') chars += m.content.length;
    else if (Array.isArray(m.content)) for (const p of m.content) if (p.type === 'text') chars += p.text.length;
  }
  return { input: Math.ceil(chars / 4), output: maxCompletionTokens ?? defaultOutput };
}

/** Estimated USD cost from the catalogue's per-million-token prices; null when the model has no `cost`. */
export function estimateCost(model: ModelSpec | undefined, t: TokenEstimate): number | null {
  if (!model?.cost) return null;
  return (t.input * model.cost.input_per_mtok + t.output * model.cost.output_per_mtok) / 1e6;
}

/** USD cost of tokens a request used (chat, embeddings, shadow calls); null without usage or prices. */
export function usageCost(model: ModelSpec | undefined, usage: { prompt_tokens: number; completion_tokens?: number } | undefined): number | null {
  return usage ? estimateCost(model, { input: usage.prompt_tokens, output: usage.completion_tokens ?? 0 }) : null;
}

/**
 * Constraint `max_cost_increase` (docs/architecture.md "The routing chain", step 4): the candidates whose estimated cost exceeds the
 * route's first target's by more than the ratio, i.e. cost > first · (1 + ratio). A candidate with
 * no known cost is kept (nothing shows it is dearer), and when the first target has no known cost
 * the constraint cannot be evaluated and filters nothing.
 */
export function overCostCeiling(
  candidates: readonly TargetRef[],
  first: TargetRef,
  ratio: number,
  models: Readonly<Record<string, ModelSpec>>,
  tokens: TokenEstimate,
): Set<TargetRef> {
  const base = estimateCost(ownValue(models, first.model), tokens);
  const out = new Set<TargetRef>();
  if (base === null) return out;
  const ceiling = base * (1 + ratio);
  for (const c of candidates) {
    const cost = estimateCost(ownValue(models, c.model), tokens);
    // A relative epsilon: a price equal to the ceiling must not be filtered by rounding.
    if (cost !== null && cost > ceiling * (1 + 1e-12)) out.add(c);
  }
  return out;
}
