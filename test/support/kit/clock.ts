import { RoutingClock } from '../../../src/routing/routing.service';

/**
 * Milliseconds since the epoch that move only when the test moves them (`t += ms` or `advance`).
 * `now` is bound, so it can be handed to anything that takes a `() => number` clock.
 */
export class ManualClock {
  constructor(public t: number = Date.UTC(2025, 0, 1)) {}

  readonly now = (): number => this.t;

  advance(ms: number): number {
    return (this.t += ms);
  }
}

/** The clock routing reads once per decision, standing still at `at`. */
export class FixedClock extends RoutingClock {
  constructor(public at: Date) {
    super();
  }

  now(): Date {
    return this.at;
  }
}
