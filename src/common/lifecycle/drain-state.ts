import { Injectable } from '@nestjs/common';

/**
 * In-flight request count and the draining flag (docs/architecture.md "Graceful shutdown"): readiness turns 503 as soon
 * as draining starts; shutdown waits until in-flight reaches zero or the drain timeout passes.
 */
@Injectable()
export class DrainState {
  private inFlight = 0;
  private draining = false;
  private waiters: Array<() => void> = [];

  get isDraining(): boolean {
    return this.draining;
  }

  get active(): number {
    return this.inFlight;
  }

  enter(): void {
    this.inFlight++;
  }

  leave(): void {
    this.inFlight--;
    if (this.inFlight === 0) this.waiters.splice(0).forEach((w) => w());
  }

  startDraining(): void {
    this.draining = true;
  }

  /** Resolves true when no request is in flight, false when `timeoutMs` passed first. */
  idle(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
