import { thrownBy } from '../../test/support/kit';
import { loadGatewayConfig } from '../config/gateway-config';
import { ConfigError } from '../config/schema';

/** `learning:` in gateway.yaml (README "Configuration"): defaults, overrides, and the path of a bad field. */
describe('learning config', () => {
  const errorOf = (yaml: string): string => thrownBy(() => loadGatewayConfig(yaml, {}), ConfigError).message;

  it('defaults to a 30-day window, a 5-second beat and weights 0.6 / 0.4', () => {
    expect(loadGatewayConfig('', {}).learning).toEqual({ window_days: 30, refresh_seconds: 5, weights: { score: 0.6, useful: 0.4 } });
  });

  it('takes each key on its own, frozen', () => {
    const c = loadGatewayConfig('learning: { window_days: 7, weights: { score: 0.5, useful: 0.5 } }', {});
    expect(c.learning).toEqual({ window_days: 7, refresh_seconds: 5, weights: { score: 0.5, useful: 0.5 } });
    expect(Object.isFrozen(c.learning.weights)).toBe(true);
  });

  it('refuses weights that do not sum to 1, unknown keys and out-of-range values, naming the path', () => {
    expect(errorOf('learning: { weights: { score: 0.7, useful: 0.4 } }')).toMatch(/^learning\.weights: score and useful must sum to 1/);
    expect(errorOf('learning: { weights: { score: 1 } }')).toBe('learning.weights.useful: is required');
    expect(errorOf('learning: { window: 3 }')).toBe('learning.window: unknown key (allowed: window_days, refresh_seconds, weights)');
    expect(errorOf('learning: { refresh_seconds: 0 }')).toBe('learning.refresh_seconds: must be at least 0.05, got 0');
    expect(errorOf('learning: { window_days: -1 }')).toBe('learning.window_days: must be at least 0.001, got -1');
    expect(errorOf('learning: { weights: { score: 1.5, useful: -0.5 } }')).toBe('learning.weights.score: must be at most 1, got 1.5');
  });
});
