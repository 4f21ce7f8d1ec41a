/**
 * Gemini native API wire types (Google's `generateContent` API), for this folder only: nothing outside
 * `providers/gemini/` imports them. Only the fields the gateway sends or
 * reads are typed; everything from the upstream is treated as optional.
 */

export interface GeminiFunctionCall {
  name: string;
  args?: Record<string, unknown>;
  id?: string;
}

export interface GeminiPart {
  text?: string;
  /** A thought summary (only returned with `includeThoughts`); never part of the answer. */
  thought?: boolean;
  /** Opaque base64 signature Gemini 3 requires back on the same functionCall part. */
  thoughtSignature?: string;
  inlineData?: { mimeType: string; data: string };
  fileData?: { mimeType?: string; fileUri: string };
  functionCall?: GeminiFunctionCall;
  functionResponse?: { name: string; response: Record<string, unknown>; id?: string };
}

export interface GeminiContent {
  role?: 'user' | 'model';
  parts?: GeminiPart[];
}

export interface GeminiFunctionDeclaration {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
}

export interface GeminiThinkingConfig {
  thinkingBudget?: number;
  thinkingLevel?: 'minimal' | 'low' | 'medium' | 'high';
  includeThoughts?: boolean;
}

export interface GeminiGenerationConfig {
  temperature?: number;
  topP?: number;
  maxOutputTokens?: number;
  stopSequences?: string[];
  candidateCount?: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  responseMimeType?: 'application/json' | 'text/plain';
  /** The OpenAPI-subset schema every model takes (`structured_output: converted_schema`). */
  responseSchema?: Record<string, unknown>;
  /** A JSON Schema as it is, on the models that take it (`structured_output: native`). */
  responseJsonSchema?: Record<string, unknown>;
  thinkingConfig?: GeminiThinkingConfig;
}

export interface GeminiGenerateContentRequest {
  contents: GeminiContent[];
  systemInstruction?: { parts: GeminiPart[] };
  tools?: { functionDeclarations: GeminiFunctionDeclaration[] }[];
  toolConfig?: { functionCallingConfig: { mode: 'AUTO' | 'ANY' | 'NONE'; allowedFunctionNames?: string[] } };
  generationConfig?: GeminiGenerationConfig;
}

export interface GeminiCandidate {
  content?: GeminiContent;
  finishReason?: string;
  index?: number;
}

export interface GeminiUsageMetadata {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  thoughtsTokenCount?: number;
  cachedContentTokenCount?: number;
  toolUsePromptTokenCount?: number;
  totalTokenCount?: number;
}

export interface GeminiErrorBody {
  code?: number;
  message?: string;
  status?: string;
  details?: { '@type'?: string; reason?: string; retryDelay?: string; [k: string]: unknown }[];
}

/** One whole response, or one SSE event of a stream (each event is a full response fragment). */
export interface GeminiGenerateContentResponse {
  candidates?: GeminiCandidate[];
  promptFeedback?: { blockReason?: string };
  usageMetadata?: GeminiUsageMetadata;
  modelVersion?: string;
  responseId?: string;
  /** An error object in place of a response (mid-stream). */
  error?: GeminiErrorBody;
}

export interface GeminiEmbedContentRequest {
  model?: string;
  content: { parts: { text: string }[] };
  outputDimensionality?: number;
}

export interface GeminiBatchEmbedContentsRequest {
  requests: (GeminiEmbedContentRequest & { model: string })[];
}

export interface GeminiEmbedContentResponse {
  embedding?: { values?: number[] };
}

export interface GeminiBatchEmbedContentsResponse {
  embeddings?: { values?: number[] }[];
}
