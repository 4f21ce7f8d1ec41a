import type { ProviderFamily } from '../../config/gateway-config.schema';
import type { AdapterCapabilities, FinishReason, StructuredOutputMode, UpstreamTarget } from '../provider-adapter';

/**
 * The OpenAI-compatible families: one adapter, configured by the quirks each family declares here
 * (variants, never copies: docs/architecture.md "Capabilities, never model names"). Facts from each
 * provider's API documentation.
 */
export const OPENAI_COMPATIBLE_FAMILIES = [
  'openai', 'groq', 'azure', 'deepseek', 'mistral', 'together', 'openrouter', 'vllm', 'ollama',
] as const satisfies readonly ProviderFamily[];
export type OpenAiCompatibleFamily = (typeof OPENAI_COMPATIBLE_FAMILIES)[number];

export const isOpenAiCompatibleFamily = (family: string): family is OpenAiCompatibleFamily =>
  (OPENAI_COMPATIBLE_FAMILIES as readonly string[]).includes(family);

/** Where a finish reason maps to; `error` means the upstream stopped on an error, surfaced as one. */
export type FinishMapping = FinishReason | 'error';

export interface OpenAiVariant {
  family: OpenAiCompatibleFamily;
  /** Used when the provider config has no `base_url`; absent = the config must give one. */
  defaultBaseUrl?: string;
  /** `bearer`: `Authorization: Bearer <key>`; `api-key`: Azure's `api-key: <key>` header. */
  auth: 'bearer' | 'api-key';
  /**
   * `openai`: `{base}/chat/completions`, model in the body. `azure`: the deployment URL
   * `{base}/openai/deployments/{upstream}/…?api-version=…` when the provider has `api_version`,
   * else the v1 GA path `{base}/openai/v1/…` with the model in the body.
   */
  urlShape: 'openai' | 'azure';
  /** OpenAI/Azure reasoning models reject `max_tokens`; most compatible servers only know it. */
  tokenLimitParam: 'max_completion_tokens' | 'max_tokens';
  /** Whether the `developer` role is understood; if not it is sent as `system`. */
  developerRole: boolean;
  /** How an effort is sent to a model whose reasoning mode is `effort`. */
  reasoningParam: 'reasoning_effort' | 'reasoning.effort';
  /** Response fields holding reasoning text, in order of preference (vLLM versions differ in the name). */
  reasoningFields: readonly ('reasoning_content' | 'reasoning')[];
  /** Mistral calls the seed `random_seed`. */
  seedParam: 'seed' | 'random_seed';
  /** Mistral spells `tool_choice: "required"` as `"any"`. */
  toolChoiceRequired: 'required' | 'any';
  /** Mistral refuses tool-call ids that are not 9 letters/digits. */
  toolCallIds: 'any' | 'alnum9';
  /** Whether `stream_options: {include_usage: true}` is accepted; families that always send usage say no. */
  streamUsageOption: boolean;
  /** Family-specific finish reasons on top of the common table below. */
  finishReasons: Readonly<Record<string, FinishMapping>>;
  /**
   * `response_format: json_schema` for a model whose config sets no `structured_output`: `native`
   * (passed through) where the family's servers take it for every model, `none` where it depends on
   * the model (Groq, Together, OpenRouter) or is missing (DeepSeek has JSON mode only), so a model
   * opts in with `structured_output: native` rather than getting an upstream 400.
   */
  structuredOutput: Extract<StructuredOutputMode, 'native' | 'none'>;
  /** What the family takes; `jsonSchema` here is ignored (it follows the target's structured output). */
  capabilities: AdapterCapabilities;
}

/** Finish reasons every family may send; anything not in here or the family's table becomes `stop`. */
export const COMMON_FINISH_REASONS: Readonly<Record<string, FinishMapping>> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool_calls',
  content_filter: 'content_filter',
  function_call: 'tool_calls',
  error: 'error',
};

const caps = (c: Partial<AdapterCapabilities>): AdapterCapabilities => ({
  embeddings: true, tools: true, multipleChoices: false, seed: true, images: false, jsonMode: true, jsonSchema: false, recursiveSchemas: true, ...c,
});

/** The family's capabilities for one target: JSON schema as the model's `structured_output` (else the family default) says. */
export function capabilitiesFor(variant: OpenAiVariant, target: UpstreamTarget): AdapterCapabilities {
  return { ...variant.capabilities, jsonSchema: (target.structuredOutput ?? variant.structuredOutput) === 'native' };
}

/** Defaults shared by the third-party compatible servers; each entry below states its differences. */
const compatible = {
  auth: 'bearer',
  urlShape: 'openai',
  tokenLimitParam: 'max_tokens',
  developerRole: false,
  reasoningParam: 'reasoning_effort',
  reasoningFields: ['reasoning_content', 'reasoning'],
  seedParam: 'seed',
  toolChoiceRequired: 'required',
  toolCallIds: 'any',
  streamUsageOption: true,
  finishReasons: {},
  structuredOutput: 'none',
} as const satisfies Partial<OpenAiVariant>;

export const VARIANTS = {
  openai: {
    ...compatible,
    family: 'openai',
    structuredOutput: 'native',
    defaultBaseUrl: 'https://api.openai.com/v1',
    tokenLimitParam: 'max_completion_tokens',
    developerRole: true,
    capabilities: caps({ multipleChoices: true, images: true }),
  },
  azure: {
    ...compatible,
    family: 'azure',
    structuredOutput: 'native',
    auth: 'api-key',
    urlShape: 'azure',
    tokenLimitParam: 'max_completion_tokens',
    developerRole: true,
    capabilities: caps({ multipleChoices: true, images: true }),
  },
  groq: {
    ...compatible,
    family: 'groq',
    defaultBaseUrl: 'https://api.groq.com/openai/v1',
    tokenLimitParam: 'max_completion_tokens',
    // Groq answers `message.reasoning` with reasoning_format "parsed".
    reasoningFields: ['reasoning', 'reasoning_content'],
    // Groq answers 400 to an `n` other than 1; no embeddings endpoint.
    capabilities: caps({ embeddings: false }),
  },
  deepseek: {
    ...compatible,
    family: 'deepseek',
    defaultBaseUrl: 'https://api.deepseek.com',
    finishReasons: { insufficient_system_resource: 'stop' },
    // No seed in DeepSeek's API reference, no embeddings endpoint.
    capabilities: caps({ embeddings: false, seed: false }),
  },
  mistral: {
    ...compatible,
    family: 'mistral',
    structuredOutput: 'native',
    defaultBaseUrl: 'https://api.mistral.ai/v1',
    seedParam: 'random_seed',
    toolChoiceRequired: 'any',
    toolCallIds: 'alnum9',
    // Usage always arrives on the finish chunk.
    streamUsageOption: false,
    finishReasons: { model_length: 'length' },
    capabilities: caps({}),
  },
  together: {
    ...compatible,
    family: 'together',
    defaultBaseUrl: 'https://api.together.xyz/v1',
    // Usage arrives on the last chunk without asking.
    streamUsageOption: false,
    finishReasons: { eos: 'stop' },
    capabilities: caps({ multipleChoices: true }),
  },
  openrouter: {
    ...compatible,
    family: 'openrouter',
    defaultBaseUrl: 'https://openrouter.ai/api/v1',
    reasoningParam: 'reasoning.effort',
    reasoningFields: ['reasoning', 'reasoning_content'],
    // Usage is always in the final chunk.
    streamUsageOption: false,
    capabilities: caps({ images: true }),
  },
  vllm: {
    ...compatible,
    family: 'vllm',
    structuredOutput: 'native',
    // Older vLLM sends `reasoning_content`, newer `reasoning`: accept both.
    reasoningFields: ['reasoning', 'reasoning_content'],
    capabilities: caps({ multipleChoices: true, images: true }),
  },
  ollama: {
    ...compatible,
    family: 'ollama',
    structuredOutput: 'native',
    defaultBaseUrl: 'http://localhost:11434/v1',
    reasoningFields: ['reasoning', 'reasoning_content'],
    capabilities: caps({ images: true }),
  },
} as const satisfies Record<OpenAiCompatibleFamily, OpenAiVariant>;

export function variantOf(family: OpenAiCompatibleFamily): OpenAiVariant {
  return VARIANTS[family];
}
