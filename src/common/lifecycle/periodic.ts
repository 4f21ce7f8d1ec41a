const ignore = (): void => undefined;

/**
 * The timer, single-flight and shutdown of a periodic job (learning aggregation, regression detector
 * and regressions snapshot, experiment stop rules), so each job holds only what one run does.
 *
 * - `run()` never overlaps itself in one process: a call while a run is under way waits for it and
 *   then runs again, so whatever was written before the call is seen by the run it gets back.
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
    while (this.inFlight) await this.inFlight;
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
    const pending: Array<Promise<unknown>> = [];
    if (this.inFlight) pending.push(this.inFlight);
    if (this.beating) pending.push(this.beating);
    if (pending.length === 0 || !(waitMs > 0)) return;
    const p = Promise.all(pending.map((x) => x.then(ignore, ignore)));
    let timer: NodeJS.Timeout | undefined;
    const timeUp = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, waitMs);
      timer.unref();
    });
    await Promise.race([p.then(ignore, ignore), timeUp]);
    clearTimeout(timer);
  }
}
