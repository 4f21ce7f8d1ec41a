import { ConfigError } from '../config/schema';
import { GatewayError } from '../common/errors/gateway-error';
import { loadGatewayConfig } from '../config/gateway-config';
import { RoutingService } from './routing.service';
import type { RoutingInput, RoutingMode } from './routing.types';
import { FakeStats, makeConfig, makeInput } from './testing/routing-fakes';

const MARKER = 'ZQX-PROMPT-MARKER-4242';

const YAML = `
providers:
  p: { family: mock }
  q: { family: mock }
models:
  a: { provider: p, quality: 0.7 }
  b: { provider: q, quality: 0.6 }
routes:
  - { name: main, models: [auto], strategy: feedback_driven, targets: [p/a, q/b] }
  - { name: support, models: [help], strategy: ordered, targets: [q/b], template: helper }
templates:
  helper: { system: "You help {{customer}}." }
firewall:
  rules:
    - { id: secrets, pattern: "(?i)api[_-]?key\\\\s*[:=]", action: block }
    - { id: emails, pattern: "[\\\\w.+-]+@[\\\\w-]+\\\\.[a-z]+", action: redact, replacement: "<email>" }
    - { id: no-refunds, pattern: "(?i)refund", action: block, routes: [support] }
`;

describe('RoutingService: the chain (rule → template → firewall → constraints → strategy)', () => {
  const service = new RoutingService(makeConfig(YAML), new FakeStats());
  const route = (o: Partial<RoutingInput>) => service.route(makeInput(o));

  describe.each<RoutingMode>(['live', 'dry-run'])('in %s mode', (mode) => {
    it('a block gives the firewall shape: every candidate filtered as firewall_blocked with score 0, nothing to send, no router', () => {
      const d = route({ mode, model: 'auto,help', messages: [{ role: 'user', content: `${MARKER} here is my api_key = 123` }] });
      expect(d.insight).toMatchObject({ firewallBlocked: true, routerInvoked: false, confidence: null, confidenceReason: 'no_router_invoked', evidence: null });
      expect(d.candidates).toEqual([]);
      expect(d.plan).toEqual([]);
      expect(d.messages).toEqual([]);
      expect(d.filtered).toEqual([
        { provider: 'p', model: 'a', reason: 'firewall_blocked', score: 0 },
        { provider: 'q', model: 'b', reason: 'firewall_blocked', score: 0 },
      ]);
      expect(d.firewall).toEqual({ blockedBy: 'secrets', redactedBy: [] });
      expect(d.strategyId).toBe('feedback_driven');
      expect(JSON.stringify(d)).not.toContain(MARKER);
    });

    it('redacts before the messages are forwarded, template messages included', () => {
      const d = route({
        mode,
        model: 'help',
        inputs: { customer: 'ana@example.com' },
        messages: [{ role: 'user', content: `${MARKER} write to bob@example.org` }],
      });
      expect(d.messages).toEqual([
        { role: 'system', content: 'You help <email>.' },
        { role: 'user', content: `${MARKER} write to <email>` },
      ]);
      expect(d.firewall).toEqual({ blockedBy: null, redactedBy: ['emails'] });
      expect(d.plan).toEqual([{ provider: 'q', model: 'b' }]);
      expect(d.insight.firewallBlocked).toBe(false);
    });

    it('applies a route-scoped rule on its route only', () => {
      const messages = [{ role: 'user' as const, content: 'I want a refund' }];
      expect(route({ mode, model: 'auto', messages }).insight.firewallBlocked).toBe(false);
      expect(route({ mode, model: 'help', inputs: { customer: 'Ana' }, messages }).firewall?.blockedBy).toBe('no-refunds');
      expect(route({ mode, model: 'auto,help', messages }).firewall?.blockedBy).toBe('no-refunds');
    });
  });

  it('runs the firewall after templates, so a template input can be blocked', () => {
    const d = route({ model: 'help', inputs: { customer: 'apikey: 1' }, messages: [{ role: 'user', content: 'hi' }] });
    expect(d.firewall?.blockedBy).toBe('secrets');
  });

  it('blocks an implicit rule (bare catalogue id) with the global rules, and reports the direct strategy', () => {
    const d = route({ model: 'a', messages: [{ role: 'user', content: 'API-KEY=1' }] });
    expect(d.strategyId).toBe('direct');
    expect(d.filtered).toEqual([{ provider: 'p', model: 'a', reason: 'firewall_blocked', score: 0 }]);
  });

  it('leaves non-routers reporting no_router_invoked, and a comma list takes the first part\'s router insight', () => {
    expect(route({ model: 'help', inputs: { customer: 'Ana' } }).insight).toMatchObject({ routerInvoked: false, confidenceReason: 'no_router_invoked' });
    const d = route({ model: 'auto,help' });
    expect(d.insight).toMatchObject({ routerInvoked: true, phase: 'cold_start', confidenceReason: 'cap_day0' });
    expect(d.plan).toEqual([{ provider: 'p', model: 'a' }, { provider: 'q', model: 'b' }]);
    expect(route({ model: 'help,auto', inputs: { customer: 'Ana' } }).insight.routerInvoked).toBe(false);
  });

  it('keeps an unknown model a 404 model_not_found (explain maps it to no_route)', () => {
    expect(() => route({ model: 'nope' })).toThrow(GatewayError);
  });

  it('is refused at start-up, with the rule path, when a firewall pattern is outside the linear-time language', () => {
    expect(() => loadGatewayConfig(`firewall: { rules: [ { id: x, pattern: "(a)\\\\1", action: block } ] }`, {})).toThrow(
      /^firewall\.rules\.0\.pattern: invalid regular expression for the firewall's linear-time matcher: a backreference/,
    );
    // RoutingService compiles the rules itself too (a config built without the loader's check).
    const cfg = makeConfig('');
    const bad = { ...cfg, gateway: { ...cfg.gateway, firewall: { rules: [{ id: 'x', pattern: '(?=a)', action: 'block' as const }] } } };
    expect(() => new RoutingService(bad)).toThrow(ConfigError);
  });
});
