import { loadGatewayConfig } from '../config/gateway-config';

const errorOf = (yaml: string): string => {
  try {
    loadGatewayConfig(yaml, {});
  } catch (err) {
    return (err as Error).message;
  }
  return 'no error';
};

describe('config `routing` (the learning router\'s parameters)', () => {
  it('has documented defaults', () => {
    expect(loadGatewayConfig('', {}).routing).toEqual({
      n0: 2,
      n_min: 20,
      n_steady: 200,
      prior_variance: 0.04,
      variance_floor: 0.01,
      default_prior: 0.5,
      latency_target_ms: 2000,
      confidence_draws: 1000,
      weights: {
        cold_start: { session: 0.24, auto: 0.06, manual: 0.35, benchmark: 0.35 },
        learning: { session: 0.4, auto: 0.1, manual: 0.25, benchmark: 0.25 },
        steady: { session: 0.56, auto: 0.14, manual: 0.15, benchmark: 0.15 },
      },
      confidence_caps: { day0: 0.5, shared: 0.75, insufficient_samples: 0.6 },
      retry_starved: { enabled: true, after_requests: 2000, after_seconds: 86_400, share: 0.02, rising_share: 0 },
      smart_cost: { tolerance: 0.05, default_output_tokens: 256 },
      exploration: { decay_samples: 35, floor: 0.3 },
      regressions: { margin: 0.1, rolling_hours: 24, min_samples: 20, check_seconds: 60, penalty: 0.05, max_penalty: 0.2 },
    });
  });

  it('takes partial sections, keeping the other defaults', () => {
    const r = loadGatewayConfig('routing: { n0: 3, weights: { steady: { session: 1, auto: 0, manual: 0, benchmark: 0 } }, regressions: { margin: 0.2 } }', {}).routing;
    expect(r.n0).toBe(3);
    expect(r.weights.steady).toEqual({ session: 1, auto: 0, manual: 0, benchmark: 0 });
    expect(r.weights.cold_start.manual).toBe(0.35);
    expect(r.regressions).toMatchObject({ margin: 0.2, rolling_hours: 24 });
    expect(loadGatewayConfig('routing: { exploration: { floor: 1 } }', {}).routing.exploration).toEqual({ decay_samples: 35, floor: 1 });
  });

  it.each([
    ['routing: { epsilon: 0.1 }', /^routing\.epsilon: unknown key/],
    ['routing: { exploration: 0.1 }', /^routing\.exploration: expected a map, got number/],
    ['routing: { exploration: { rate: 0.1 } }', /^routing\.exploration\.rate: unknown key \(allowed: decay_samples, floor\)/],
    ['routing: { exploration: { decay_samples: 0 } }', /^routing\.exploration\.decay_samples: must be at least 1, got 0/],
    ['routing: { exploration: { floor: 0 } }', /^routing\.exploration\.floor: must be at least 0\.01, got 0/],
    ['routing: { exploration: { floor: 1.5 } }', /^routing\.exploration\.floor: must be at most 1, got 1\.5/],
    ['routing: { smart_cost: { tolerence: 0.1 } }', /^routing\.smart_cost\.tolerence: unknown key/],
    ['routing: { n_min: 300 }', /^routing\.n_min: must not exceed routing\.n_steady \(200\), got 300/],
    ['routing: { weights: { learning: { session: 0.5, auto: 0.5, manual: 0.5, benchmark: 0 } } }', /^routing\.weights\.learning: session, auto, manual and benchmark must sum to 1, got 1\.5/],
    ['routing: { weights: { learning: { session: 0, auto: 0, manual: 0.5, benchmark: 0.5 } } }', /^routing\.weights\.learning: session and auto must not both be 0/],
    ['routing: { weights: { learning: { session: 1 } } }', /^routing\.weights\.learning\.auto: is required/],
    ['routing: { confidence_caps: { day0: 1.5 } }', /^routing\.confidence_caps\.day0: must be at most 1/],
    ['routing: { confidence_draws: 5 }', /^routing\.confidence_draws: must be at least 10/],
    ['routing: { n0: 0 }', /^routing\.n0: must be at least/],
  ])('refuses %s', (yaml, message) => {
    expect(errorOf(yaml)).toMatch(message);
  });
});
