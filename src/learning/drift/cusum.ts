/**
 * The change detector's sequential test (README "Drift: change detection"): a two-sided, self-starting
 * CUSUM on one stream of samples in [0, 1] of one (organisation, provider, model), counted in samples
 * rather than clock time, so a change is seen after tens of samples at any traffic rate.
 *
 * Reference: the mean and population variance of the samples since the detector (re)started, by
 * Welford's recurrence with its count capped at `memory` (past that, an exponential average whose
 * weight is 1/memory: a reference that follows a model's slow drift instead of fixing its first
 * months). No alarm is raised before the reference holds `warmup` samples (the statistics already
 * run from MIN_REFERENCE samples on: a model routing has starved may never collect more, and routing
 * follows up a rise the statistics show, learned-score.ts retryPick).
 *
 * Each later sample x is standardised against the reference as it stood before it,
 * z = (x − mean)/max(sd, sd_floor), cut to ±z_clamp (a stream of nearly constant values, such as the
 * `auto` signal of a healthy model, must not turn one failure into an alarm), and feeds
 *
 *   up   = max(0, up + z − k)     a rise of at least 2k standard deviations;
 *   down = max(0, down − z − k)   a drop of at least 2k standard deviations.
 *
 * Either statistic above h is an alarm. The change point is the first sample of the statistic's
 * current excursion (the last time it left 0): the usual CUSUM estimate. On an alarm the test starts
 * again with that excursion's samples as its new reference, so it compares what follows with the
 * model as it is now. While either statistic is above h/2 a change is probably under way, and the
 * reference does not learn from the sample (it would absorb the change it is testing for).
 *
 * The state is plain numbers, persisted by the beat in the same transaction as the rows it took in
 * (drift.repository.ts): replicas and restarts continue one test, each sample counted once.
 */
export interface CusumParams {
  /** Allowance, in standard deviations: half the smallest shift worth detecting. */
  k: number;
  /** Alarm threshold. */
  h: number;
  /** Samples that only build the reference, after a start or an alarm. */
  warmup: number;
  /** |z| is cut to this. */
  zClamp: number;
  /** The reference's standard deviation is at least this (a constant stream has 0). */
  sdFloor: number;
  /** The reference's count stops growing here: then an exponential average of weight 1/memory. */
  memory: number;
}

/** One direction's excursion: its statistic, and the samples since it last left 0. */
export interface Excursion {
  s: number;
  /** When its first sample entered (ms since the epoch); null while s is 0. */
  start: number | null;
  n: number;
  sum: number;
  sumSq: number;
}

export interface CusumState {
  /** Samples in the reference (capped at memory), its mean and population variance. */
  n: number;
  mean: number;
  variance: number;
  up: Excursion;
  down: Excursion;
  /** Every sample this test has taken in since it was created. */
  samples: number;
}

export type Direction = 'rise' | 'drop';

export interface Alarm {
  direction: Direction;
  /** The estimated change point: the first sample of the excursion that crossed h (ms since the epoch). */
  since: number;
  /** Samples from the change point to the alarm (the detection delay, in samples). */
  samples: number;
  /** The reference mean before, and the mean of the samples since the change point. */
  before: number;
  after: number;
  /** The statistic that crossed h. */
  statistic: number;
}

const idle = (): Excursion => ({ s: 0, start: null, n: 0, sum: 0, sumSq: 0 });
/** A reference of fewer samples has no spread worth standardising by (and two samples' mean is anywhere). */
const MIN_REFERENCE = 5;

export function initialState(): CusumState {
  return { n: 0, mean: 0, variance: 0, up: idle(), down: idle(), samples: 0 };
}

function learn(state: CusumState, x: number, p: CusumParams): void {
  const n = Math.min(state.n + 1, p.memory);
  const d = x - state.mean;
  state.mean += d / n;
  state.variance = Math.max(0, state.variance + (d * (x - state.mean) - state.variance) / n);
  state.n = n;
}

function advance(e: Excursion, increment: number, x: number, at: number): void {
  const s = Math.max(0, e.s + increment);
  if (s <= 0) {
    Object.assign(e, idle());
    return;
  }
  if (e.s <= 0) Object.assign(e, { start: at, n: 0, sum: 0, sumSq: 0 });
  e.s = s;
  e.n += 1;
  e.sum += x;
  e.sumSq += x * x;
}

/** The sample's standardised value against the reference as it stands, cut to ±zClamp. */
export function standardise(state: CusumState, x: number, p: CusumParams): number {
  const sd = Math.max(Math.sqrt(state.variance), p.sdFloor);
  return Math.max(-p.zClamp, Math.min(p.zClamp, (x - state.mean) / sd));
}

/**
 * Takes in one sample x that entered at `at` (ms since the epoch); returns the alarm it raises, if
 * any. Mutates `state`.
 */
export function step(state: CusumState, x: number, at: number, p: CusumParams): Alarm | null {
  state.samples += 1;
  const warm = state.n >= p.warmup;
  if (state.n >= MIN_REFERENCE) {
    const z = standardise(state, x, p);
    advance(state.up, z - p.k, x, at);
    advance(state.down, -z - p.k, x, at);
  }
  if (!warm) {
    // Still building the reference: the statistics run (routing follows up a rise already, README
    // "Routing that learns"), but no alarm is raised on a reference of so few samples.
    learn(state, x, p);
    return null;
  }
  const crossed: Excursion | null = state.down.s > p.h ? state.down : state.up.s > p.h ? state.up : null;
  if (crossed !== null) {
    const direction: Direction = crossed === state.down ? 'drop' : 'rise';
    const after = crossed.sum / crossed.n;
    const alarm: Alarm = { direction, since: crossed.start ?? at, samples: crossed.n, before: state.mean, after, statistic: crossed.s };
    // Start again from the model as it is now: the excursion's samples are the new reference.
    state.n = Math.min(crossed.n, p.memory);
    state.mean = after;
    state.variance = Math.max(0, crossed.sumSq / crossed.n - after * after);
    state.up = idle();
    state.down = idle();
    return alarm;
  }
  if (Math.max(state.up.s, state.down.s) < p.h / 2) learn(state, x, p);
  return null;
}
