import type { FirewallRuleSpec } from '../../config/gateway-config';
import { ConfigError } from '../../config/schema';
import type { ChatMessage, ContentPart } from '../../providers/provider-adapter';
import { describePatternError, FirewallPattern, FirewallPatternError } from '../../common/pattern/firewall-pattern';

/** What a redact rule writes in place of a match when it names no `replacement`. */
export const DEFAULT_REDACTION = '[REDACTED]';

interface CompiledRule {
  id: string;
  action: 'block' | 'redact';
  pattern: FirewallPattern;
  replacement: string;
  /** Route names the rule is limited to; undefined = every request (global). */
  routes?: ReadonlySet<string>;
}

/** The firewall's verdict on one request. Rule ids only: never any of the text that matched. */
export interface FirewallOutcome {
  /** The id of the first block rule that matched, or null. */
  blockedBy: string | null;
  /** Ids of the redact rules that replaced something, in config order. */
  redactedBy: string[];
  /** The messages to forward (redacted); empty when blocked, so nothing can be sent by mistake. */
  messages: ChatMessage[];
}

/**
 * The LLM firewall (docs/architecture.md "The routing chain", step 3): config rules over message text, compiled once at start-up.
 * The text scanned is every string content and every text part of every message (template messages
 * included, after placeholders are filled); images, tool-call arguments and names are not scanned.
 * Block rules are checked first, on the text as sent, so a redaction can never hide what a block
 * rule looks for; then redact rules apply in config order, each on the previous one's output.
 */
export class Firewall {
  private constructor(private readonly rules: readonly CompiledRule[]) {}

  /** Throws ConfigError naming `firewall.rules.<i>.pattern` for a pattern outside the firewall's language. */
  static compile(rules: readonly FirewallRuleSpec[]): Firewall {
    return new Firewall(
      rules.map((r, i) => {
        let pattern: FirewallPattern;
        try {
          pattern = FirewallPattern.compile(r.pattern);
        } catch (err) {
          if (err instanceof FirewallPatternError) throw new ConfigError(`firewall.rules.${i}.pattern`, describePatternError(err));
          throw err;
        }
        return { id: r.id, action: r.action, pattern, replacement: r.replacement ?? DEFAULT_REDACTION, routes: r.routes && new Set(r.routes) };
      }),
    );
  }

  get size(): number {
    return this.rules.length;
  }

  /**
   * Applies the rules that are global or limited to one of `routeNames` (the routes of the request's
   * rule; a comma list may have several).
   */
  apply(messages: ChatMessage[], routeNames: readonly string[]): FirewallOutcome {
    const active = this.rules.filter((r) => !r.routes || routeNames.some((n) => r.routes!.has(n)));
    if (active.length === 0) return { blockedBy: null, redactedBy: [], messages };
    for (const rule of active) {
      if (rule.action === 'block' && messages.some((m) => textsOf(m).some((t) => rule.pattern.test(t)))) {
        return { blockedBy: rule.id, redactedBy: [], messages: [] };
      }
    }
    let out = messages;
    const redactedBy: string[] = [];
    for (const rule of active) {
      if (rule.action !== 'redact') continue;
      let hit = false;
      const redact = (text: string): string => {
        if (!rule.pattern.test(text)) return text;
        const spans = rule.pattern.findAll(text);
        if (spans.length === 0) return text;
        hit = true;
        let result = '';
        let at = 0;
        for (const [start, end] of spans) {
          result += text.slice(at, start) + rule.replacement;
          at = end;
        }
        return result + text.slice(at);
      };
      out = out.map((m) => mapTexts(m, redact));
      if (hit) redactedBy.push(rule.id);
    }
    return { blockedBy: null, redactedBy, messages: out };
  }
}

function textsOf(m: ChatMessage): string[] {
  if (typeof m.content === 'string') return [m.content];
  if (Array.isArray(m.content)) return m.content.flatMap((p) => (p.type === 'text' ? [p.text] : []));
  return [];
}

function mapTexts(m: ChatMessage, fn: (text: string) => string): ChatMessage {
  if (typeof m.content === 'string') {
    const content = fn(m.content);
    return content === m.content ? m : { ...m, content };
  }
  if (Array.isArray(m.content)) {
    let changed = false;
    const content = m.content.map((p): ContentPart => {
      if (p.type !== 'text') return p;
      const text = fn(p.text);
      if (text === p.text) return p;
      changed = true;
      return { type: 'text', text };
    });
    return changed ? { ...m, content } : m;
  }
  return m;
}
