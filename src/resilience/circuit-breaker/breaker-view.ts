/**
 * The circuit breakers as routing sees them (docs/architecture.md "The routing chain", step 4:
 * candidates = route targets minus those whose breaker is open). Read synchronously on the hot path, so it is an in-process view,
 * never a store call; CircuitBreakerService implements it (bound in RoutingModule), fakes in tests.
 */
export abstract class BreakerView {
  /**
   * Milliseconds left of the provider's open time, as this replica last saw its breaker; null when it
   * is closed, or its open time is over (half-open: the target stays a candidate so the probe can happen).
   */
  abstract openForMs(providerId: string): number | null;
}
