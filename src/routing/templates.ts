import { GatewayError } from '../common/errors/gateway-error';
import type { TemplateSpec } from '../config/gateway-config';
import type { ChatMessage, ContentPart } from '../providers/provider-adapter';

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}/g;
type Inputs = Record<string, string | number | boolean>;

/** One pass, no recursive expansion: a value that itself contains `{{x}}` is inserted as is (docs/architecture.md "The routing chain", step 2). */
function fill(text: string, inputs: Inputs): string {
  return text.replace(PLACEHOLDER, (_, name: string) => {
    if (!Object.prototype.hasOwnProperty.call(inputs, name)) {
      throw new GatewayError('missing_template_input', `The template variable "${name}" has no value in inputs.`, { param: `inputs.${name}` });
    }
    return String(inputs[name]);
  });
}

function fillMessage(m: ChatMessage, inputs: Inputs): ChatMessage {
  if (typeof m.content === 'string') return { ...m, content: fill(m.content, inputs) };
  if (Array.isArray(m.content)) {
    return { ...m, content: m.content.map((p): ContentPart => (p.type === 'text' ? { type: 'text', text: fill(p.text, inputs) } : p)) };
  }
  return m;
}

/**
 * Applies a route's template and the request's `inputs`: the template's messages go first; its
 * placeholders are always filled, the request's own messages only when `inputs` was sent (so prompts
 * that merely contain braces are left alone). A missing variable is 400 `missing_template_input`.
 */
export function applyTemplate(messages: ChatMessage[], template: TemplateSpec | undefined, inputs: Inputs | undefined): ChatMessage[] {
  const vars = inputs ?? {};
  const own = inputs ? messages.map((m) => fillMessage(m, vars)) : messages;
  if (!template) return own;
  const lead: ChatMessage[] = [];
  if (template.system !== undefined) lead.push({ role: 'system', content: fill(template.system, vars) });
  for (const m of template.messages ?? []) lead.push({ role: m.role, content: fill(m.content, vars) });
  return [...lead, ...own];
}
