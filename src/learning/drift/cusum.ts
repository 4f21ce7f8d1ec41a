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
 * Held: the caller holds the reference when a model's samples resume after a long gap (routing
 * starved it and now re-tries it, drift.repository.ts). A model with a handful of samples would take
 * its re-tries into its reference one by one and never show a rise, however large, so what the model
 * was before the gap is frozen as the reference (from MIN_HOLD samples) and its new samples decide,
 * by Wald's sequential probability ratio test between "as before" and "risen by 2·kHeld standard
 * deviations": held = Σ (z − kHeld) over the samples since the hold, z read against the reference
 * mean raised by holdMargin of its standard errors (a reference of three samples that came out low
 * by chance must not make an unchanged model look risen; an allowance kHeld above the half-shift does
 * the same at less cost to a true rise, drift.repository.ts). A rise when it passes hHeld (an alarm,
 * however small the reference), "as before" when it falls below −holdEnd or after holdMax samples
 * (the hold ends and its samples join the reference). Only a rise is tested: a model routing does
 * not serve gains nothing from a drop being found. The CUSUM statistics rest meanwhile. Routing
 * serves a held model the answers its test needs, at a worse model's price for an unchanged one, so
 * the bounds are near: a short hold that misses a rise leaves it to the next gap's hold.
 *
 * Each later sample x is standardised against the reference as it stood before it (`standardise`:
 * the predictive t of a new sample given the reference's n, mapped to a normal deviate; for a large
 * reference z = (x − mean)/max(sd, sd_floor)), cut to ±z_clamp (a stream of nearly constant values,
 * such as the `auto` signal of a healthy model, must not turn one failure into an alarm), and feeds
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
  /** The held test (see above): its allowance, rise threshold, "as before" bound, margin (in standard errors of the reference mean) and longest run. */
  kHeld: number;
  hHeld: number;
  holdEnd: number;
  holdMargin: number;
  holdMax: number;
  /** A spread the reference's is shrunk towards, worth priorDf samples (a handful of samples of a two-valued stream can all be alike). */
  priorSd: number;
  priorDf: number;
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
  /** The held test's statistic and samples (see above); absent or null when not held. */
  held?: Excursion | null;
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
/**
 * A held reference needs fewer: the held test reads it with the spread shrunk towards priorSd and
 * an allowance above the half-shift (kHeld), and a model routing starved may have had only three
 * answers (README "Drift: change detection" gives the false alarms this costs).
 */
const MIN_HOLD = 3;

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

/**
 * The sample's standardised value against the reference as it stands, cut to ±zClamp. A reference
 * of n samples knows its mean and spread only roughly when n is small, so the sample is read as the
 * predictive t statistic t = (x − mean)/(s·√(1 + 1/n)) (s the sample standard deviation: t has n − 1
 * degrees of freedom for a new draw of a normal stream whose mean and spread come from n draws) and
 * mapped to the normal deviate of the same tail (Wallace's approximation,
 * z = t·(1 − 1/(4ν))/√(1 + t²/(2ν)), within a few hundredths for ν ≥ 4): the self-starting CUSUM of
 * Hawkins (1987). With hundreds of samples it is the plain z = (x − mean)/sd.
 */
export function standardise(state: CusumState, x: number, p: CusumParams): number {
  const n = state.n;
  const nu = n - 1 + p.priorDf;
  const sd = Math.max(Math.sqrt((p.priorDf * p.priorSd * p.priorSd + state.variance * n) / nu), p.sdFloor);
  const t = (x - state.mean) / (sd * Math.sqrt(1 + 1 / n));
  const z = (t * (1 - 1 / (4 * nu))) / Math.sqrt(1 + (t * t) / (2 * nu));
  return Math.max(-p.zClamp, Math.min(p.zClamp, z));
}

/** The model's samples resume after a long gap: its new samples are tested against the reference as it stands (see above). */
export function hold(state: CusumState): void {
  if (state.n >= MIN_HOLD && !state.held) state.held = { s: 0, start: null, n: 0, sum: 0, sumSq: 0 };
}

/** Welford's merge of a block of samples (count, sum, sum of squares) into the reference. */
function merge(state: CusumState, e: Excursion, p: CusumParams): void {
  if (e.n === 0) return;
  const mean = e.sum / e.n;
  const variance = Math.max(0, e.sumSq / e.n - mean * mean);
  const n = state.n + e.n;
  const d = mean - state.mean;
  const m2 = state.variance * state.n + variance * e.n + (d * d * state.n * e.n) / n;
  state.mean += (d * e.n) / n;
  state.variance = m2 / n;
  state.n = Math.min(n, p.memory);
}

/**
 * Takes in one sample x that entered at `at` (ms since the epoch); returns the alarm it raises, if
 * any. Mutates `state`.
 */
export function step(state: CusumState, x: number, at: number, p: CusumParams): Alarm | null {
  state.samples += 1;
  if (state.held) return stepHeld(state, state.held, x, at, p);
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
  if (crossed !== null) return alarmOn(state, crossed, crossed === state.down ? 'drop' : 'rise', at, p);
  if (Math.max(state.up.s, state.down.s) < p.h / 2) learn(state, x, p);
  return null;
}

/** The alarm of excursion e, and the test started again from the model as it is now: e's samples are the new reference. */
function alarmOn(state: CusumState, e: Excursion, direction: Direction, at: number, p: CusumParams): Alarm {
  const after = e.sum / e.n;
  const alarm: Alarm = { direction, since: e.start ?? at, samples: e.n, before: state.mean, after, statistic: e.s };
  state.n = Math.min(e.n, p.memory);
  state.mean = after;
  state.variance = Math.max(0, e.sumSq / e.n - after * after);
  state.up = idle();
  state.down = idle();
  state.held = null;
  return alarm;
}

function stepHeld(state: CusumState, held: Excursion, x: number, at: number, p: CusumParams): Alarm | null {
  held.s += standardise(state, x - (p.holdMargin * Math.sqrt(state.variance)) / Math.sqrt(state.n), p) - p.kHeld;
  held.start ??= at;
  held.n += 1;
  held.sum += x;
  held.sumSq += x * x;
  if (held.s > p.hHeld) return alarmOn(state, held, 'rise', at, p);
  if (held.s < -p.holdEnd || held.n >= p.holdMax) {
    // As before: the re-tries join the reference, and the CUSUM goes on from where it rested.
    merge(state, held, p);
    state.held = null;
  }
  return null;
}
