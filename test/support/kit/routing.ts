import type { RoutingInput } from '../../../src/routing/routing.types';
import { makeCaller } from './config';

/** A dry-run routing input of one user message (factory with overrides). */
export function makeInput(overrides: Partial<RoutingInput> = {}): RoutingInput {
  return {
    caller: makeCaller(),
    model: 'auto',
    messages: [{ role: 'user', content: 'Hello there' }],
    sessionId: null,
    requestId: 'req-1',
    mode: 'dry-run',
    ...overrides,
  };
}

/** A seeded uniform source for live draws. */
export { mulberry32 as seededRandom } from '../../../src/routing/strategies/random';
