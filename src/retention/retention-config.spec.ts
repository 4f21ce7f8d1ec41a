import { thrownBy } from '../../test/support/kit';
import { loadGatewayConfig } from '../config/gateway-config';
import { ConfigError } from '../config/schema';

/** `retention:` in gateway.yaml (docs/operations.md "Retention"): defaults resolved against the learning window, and its floor. */
describe('retention config', () => {
  const errorOf = (yaml: string): string => thrownBy(() => loadGatewayConfig(yaml, {}), ConfigError).message;

  it('defaults traces and feedback to the learning window, keeps experiment events, and rollups 400 days', () => {
    expect(loadGatewayConfig('', {}).retention).toEqual({ traces_days: 30, feedback_days: 30, lifecycle_events_days: null, rollups_days: 400 });
    expect(loadGatewayConfig('learning: { window_days: 7 }', {}).retention).toEqual({ traces_days: 7, feedback_days: 7, lifecycle_events_days: null, rollups_days: 400 });
    // A window longer than 400 days carries the rollups along.
    expect(loadGatewayConfig('learning: { window_days: 500 }', {}).retention.rollups_days).toBe(500);
  });

  it('takes each key on its own; feedback follows the traces unless given; null keeps forever', () => {
    const c = loadGatewayConfig('retention: { traces_days: 90, lifecycle_events_days: 365, rollups_days: null }', {});
    expect(c.retention).toEqual({ traces_days: 90, feedback_days: 90, lifecycle_events_days: 365, rollups_days: null });
    expect(loadGatewayConfig('retention: { feedback_days: null }', {}).retention.feedback_days).toBeNull();
    expect(Object.isFrozen(c.retention)).toBe(true);
  });

  it('refuses less than the learning window, naming the field', () => {
    expect(errorOf('retention: { traces_days: 7 }')).toBe(
      'retention.traces_days: must be at least learning.window_days (30): the learning loop reads that far back, got 7',
    );
    expect(errorOf('learning: { window_days: 14 }\nretention: { traces_days: 30, feedback_days: 10 }')).toBe(
      'retention.feedback_days: must be at least learning.window_days (14): the learning loop reads that far back, got 10',
    );
    expect(errorOf('retention: { rollups_days: 20 }')).toMatch(/^retention\.rollups_days: must be at least learning\.window_days \(30\)/);
    expect(errorOf('retention: { traces_days: null }')).toBe('retention.traces_days: expected a number, got null');
    expect(errorOf('retention: { days: 3 }')).toBe('retention.days: unknown key (allowed: traces_days, feedback_days, lifecycle_events_days, rollups_days)');
    expect(errorOf('retention: { lifecycle_events_days: 0 }')).toBe('retention.lifecycle_events_days: must be at least 0.001, got 0');
  });
});
