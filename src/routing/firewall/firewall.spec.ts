import { ConfigError } from '../../config/schema';
import type { ChatMessage } from '../../providers/provider-adapter';
import { DEFAULT_REDACTION, Firewall } from './firewall';

const MARKER = 'ZQX-PROMPT-MARKER-7731';

describe('Firewall', () => {
  const fw = Firewall.compile([
    { id: 'secrets', pattern: '(?i)api[_-]?key\\s*[:=]', action: 'block' },
    { id: 'cards', pattern: '\\b\\d{4}(?:[ -]?\\d{4}){3}\\b', action: 'redact' },
    { id: 'emails', pattern: '[\\w.+-]+@[\\w-]+\\.[\\w.]+', action: 'redact', replacement: '<email>' },
    { id: 'support-only', pattern: '(?i)refund', action: 'block', routes: ['support'] },
  ]);

  it('blocks on a global rule: the rule id, no messages to forward, no text', () => {
    const out = fw.apply([{ role: 'system', content: 'be brief' }, { role: 'user', content: `${MARKER} my API_KEY: 123` }], ['default']);
    expect(out).toEqual({ blockedBy: 'secrets', redactedBy: [], messages: [] });
    expect(JSON.stringify(out)).not.toContain(MARKER);
  });

  it('scans text parts, and leaves images alone', () => {
    const msg: ChatMessage = {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: 'https://x/apikey=1.png' } },
        { type: 'text', text: 'mail me at ana@example.com' },
      ],
    };
    expect(fw.apply([msg], []).blockedBy).toBeNull();
    expect(fw.apply([msg], []).messages[0].content).toEqual([
      { type: 'image_url', image_url: { url: 'https://x/apikey=1.png' } },
      { type: 'text', text: 'mail me at <email>' },
    ]);
    expect(fw.apply([{ role: 'user', content: [{ type: 'text', text: 'apikey=1' }] }], []).blockedBy).toBe('secrets');
  });

  it('redacts every match, with the default replacement when none is given, and names the rules that acted', () => {
    const out = fw.apply([{ role: 'user', content: 'cards 4111 1111 1111 1111 and 5500-0000-0000-0004, mail a@b.io' }], []);
    expect(out.messages[0].content).toBe(`cards ${DEFAULT_REDACTION} and ${DEFAULT_REDACTION}, mail <email>`);
    expect(out.redactedBy).toEqual(['cards', 'emails']);
  });

  it('leaves messages untouched (same objects) when nothing matches', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'nothing to see' }];
    const out = fw.apply(messages, []);
    expect(out.messages[0]).toBe(messages[0]);
    expect(out.redactedBy).toEqual([]);
  });

  it('applies a route-scoped rule only on its routes', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'I want a refund' }];
    expect(fw.apply(messages, ['default']).blockedBy).toBeNull();
    expect(fw.apply(messages, ['support']).blockedBy).toBe('support-only');
    // A comma list whose parts have several routes: any of them is enough.
    expect(fw.apply(messages, ['default', 'support']).blockedBy).toBe('support-only');
  });

  it('checks block rules before any redaction, so a redact rule cannot hide what a block rule looks for', () => {
    const f = Firewall.compile([
      { id: 'hide', pattern: 'key', action: 'redact' },
      { id: 'stop', pattern: 'api key', action: 'block' },
    ]);
    expect(f.apply([{ role: 'user', content: 'my api key' }], []).blockedBy).toBe('stop');
  });

  it('refuses at start-up a pattern the linear-time matcher cannot run, naming the rule path and never any text', () => {
    let err: unknown;
    try {
      Firewall.compile([
        { id: 'ok', pattern: 'fine', action: 'block' },
        { id: 'bad', pattern: '(a+)\\1', action: 'block' },
      ]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).path).toBe('firewall.rules.1.pattern');
    expect((err as ConfigError).message).toMatch(/backreference/);
  });
});
