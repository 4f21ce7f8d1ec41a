import { withTimeout } from '../../stores/with-timeout';

const ignore = (): void => undefined;

/**
 * The timer, single-flight and shutdown of a periodic job (learning aggregation, regression detector
 * and regressions snapshot, experiment stop rules), so each job holds only what one run does.
 *
 * - `run()` never overlaps itself in one process: a call while a run (or a custom beat) is under way
 *   waits for it and then runs again, so whatever was written before the call is seen by the run it
 *   gets back, and no older beat finishes after it.
 * - `start()` beats on an unref'd timer (it never keeps a finished process alive); a beat that comes
 *   while a run or the previous beat is under way is skipped, so a slow store never piles work up
 *   (a custom beat, e.g. the aggregation job's reload, is single-flight too).
 * - `stop()` ends the beat and waits, at most the given time, for a run or beat under way.
 *
 * The work must not reject (each job counts and logs its own failures): a rejection would reach
 * every caller waiting on the run, and a beat's would be unhandled.
 */
export class Periodic<T> {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<T> | undefined;
  /** A custom beat under way (a beat that is a run is `inFlight`). */
  private beating: Promise<void> | undefined;

  constructor(private readonly work: () => Promise<T>) {}

  /** True while a run is under way. */
  get running(): boolean {
    return this.inFlight !== undefined;
  }

  async run(): Promise<T> {
    // A custom beat under way (a reload) is waited for too: it could otherwise finish after this run
    // and put back what it read before.
    while (this.inFlight || this.beating) await (this.inFlight ?? this.beating);
    const p = this.work();
    this.inFlight = p;
    try {
      return await p;
    } finally {
      if (this.inFlight === p) this.inFlight = undefined;
    }
  }

  /** Beats every `intervalMs` (none when it is 0 or less); a beat does `beat`, by default one run. */
  start(intervalMs: number, beat: () => Promise<unknown> = () => this.run()): void {
    clearInterval(this.timer);
    this.timer = undefined;
    if (!(intervalMs > 0)) return;
    this.timer = setInterval(() => {
      if (this.inFlight || this.beating) return;
      const b: Promise<void> = beat().then(ignore, ignore).finally(() => {
        if (this.beating === b) this.beating = undefined;
      });
      this.beating = b;
    }, intervalMs);
    this.timer.unref();
  }

  /** Ends the beat, then waits up to `waitMs` for a run or beat under way (0: waits for nothing). Never rejects. */
  async stop(waitMs = 0): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    const pending = [this.inFlight, this.beating].filter((p) => p !== undefined);
    if (pending.length === 0 || !(waitMs > 0)) return;
    await withTimeout(Promise.allSettled(pending), waitMs, 'periodic job').catch(ignore);
  }
}
