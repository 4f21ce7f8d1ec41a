/**
 * The change detector's calibration (README "Drift: change detection"): not a test, it asserts
 * nothing; the file name (`*.bench.ts`) keeps it out of `npm test`. Run:
 *
 *   npx jest --config jest.config.js --testMatch '<rootDir>/bench/drift-calibration.bench.ts' --runInBand
 *
 * For each candidate (k, h) of the CUSUM (src/learning/drift/cusum.ts) it feeds simulated streams,
 * one test per stream as the beat does:
 *   - no change: false alarms per 10,000 samples, on the outcome stream of each of the routing
 *     benchmark's four models (its score distributions, 15 % of answers random) and on the `auto`
 *     stream of a model failing 1 % and 5 % of its requests;
 *   - an abrupt change: samples from the change to the alarm (median, 90th percentile) for the drops
 *     and rises of the drift scenarios of `npm run bench:routing`;
 *   - a starved model's held test (cusum.ts "Held"): its rise after 3–8 samples of reference, found by
 *     one hold or not, the same rise without the hold, and the false rises and length of a hold when
 *     nothing changed.
 * DRIFT_CAL_RUNS (default 100) streams of DRIFT_CAL_SAMPLES (default 20,000) per case; DRIFT_CAL_GRID
 * (k:h pairs), DRIFT_CAL_WARMUP (default 20) and DRIFT_CAL_ZCLAMP (default 3) for the other parameters.
 */
import { CusumParams, hold, initialState, step } from '../src/learning/drift/cusum';
import { DRIFT_CUSUM } from '../src/learning/drift/drift.repository';
import { mulberry32 } from '../src/routing/strategies/random';

const RUNS = Number(process.env.DRIFT_CAL_RUNS ?? 100);
const SAMPLES = Number(process.env.DRIFT_CAL_SAMPLES ?? 20_000);
const NOISE = 0.15;
const SCORE_SD = 1.8;

function outcomeSource(scoreMean: number, usefulRate: number): (r: () => number) => number {
  const pdf = Array.from({ length: 11 }, (_, s) => Math.exp(-((s - scoreMean) ** 2) / (2 * SCORE_SD ** 2)));
  const total = pdf.reduce((a, b) => a + b, 0);
  let c = 0;
  const cdf = pdf.map((p) => (c += p / total));
  return (r) => {
    if (r() < NOISE) return 0.6 * (Math.floor(r() * 11) / 10) + 0.4 * (r() < 0.5 ? 1 : 0);
    const u = r();
    const s = cdf.findIndex((x) => u < x);
    return 0.6 * ((s < 0 ? 10 : s) / 10) + 0.4 * (r() < usefulRate ? 1 : 0);
  };
}
const autoSource = (failRate: number) => (r: () => number) => (r() < failRate ? 0 : 1);

const NULL_CASES: Array<[string, (r: () => number) => number]> = [
  ['outcome frontier-xl (7.2, .68)', outcomeSource(7.2, 0.68)],
  ['outcome balanced-pro (8.6, .86)', outcomeSource(8.6, 0.86)],
  ['outcome budget-mini (8.2, .80)', outcomeSource(8.2, 0.8)],
  ['outcome legacy-7b (5.8, .50)', outcomeSource(5.8, 0.5)],
  ['auto, 1 % failures', autoSource(0.01)],
  ['auto, 5 % failures', autoSource(0.05)],
];
const CHANGE_CASES: Array<[string, (r: () => number) => number, (r: () => number) => number]> = [
  ['drop balanced-pro → (6.0, .55)', outcomeSource(8.6, 0.86), outcomeSource(6.0, 0.55)],
  ['drop balanced-pro → (7.6, .72)', outcomeSource(8.6, 0.86), outcomeSource(7.6, 0.72)],
  ['rise legacy-7b → (9.4, .95)', outcomeSource(5.8, 0.5), outcomeSource(9.4, 0.95)],
  ['auto 1 % → 30 % failures', autoSource(0.01), autoSource(0.3)],
];

function falseAlarms(src: (r: () => number) => number, p: CusumParams, seed: number): number {
  let alarms = 0;
  for (let run = 0; run < RUNS; run++) {
    const r = mulberry32(seed * 7919 + run);
    const s = initialState();
    for (let i = 0; i < SAMPLES; i++) if (step(s, src(r), i, p)) alarms++;
  }
  return (alarms / (RUNS * SAMPLES)) * 10_000;
}

/**
 * Samples from the change to the alarm, per stream. The change comes after 300–599 samples, or
 * (`starved`) after 3–8: a model routing stopped serving early, whose few samples are all the
 * reference it has when its re-tries show the rise; its samples resume after a gap, so the beat
 * holds its reference (cusum.ts).
 */
function delays(before: (r: () => number) => number, after: (r: () => number) => number, p: CusumParams, seed: number, starved = false, gap = starved): number[] {
  const out: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const r = mulberry32(seed * 104729 + run);
    const s = initialState();
    const changeAt = starved ? 3 + Math.floor(r() * 6) : 300 + Math.floor(r() * 300);
    let i = 0;
    for (; i < changeAt; i++) step(s, before(r), i, p);
    if (gap) hold(s);
    let found = Infinity;
    for (; i < changeAt + 2_000; i++) {
      const a = step(s, after(r), i, p);
      if (a && i >= changeAt) {
        found = i - changeAt + 1;
        break;
      }
    }
    out.push(found);
  }
  return out.sort((a, b) => a - b);
}

/** How many samples a hold lasts on an unchanged stream held after 3–8 samples (until it ends either way), averaged over the streams. */
function heldLength(src: (r: () => number) => number, p: CusumParams): number {
  let total = 0;
  for (let run = 0; run < RUNS; run++) {
    const r = mulberry32(7 * 104729 + run);
    const s = initialState();
    const n = 3 + Math.floor(r() * 6);
    for (let i = 0; i < n; i++) step(s, src(r), i, p);
    hold(s);
    let i = n;
    while (s.held && i < n + 2_000) step(s, src(r), i++, p);
    total += i - n;
  }
  return total / RUNS;
}

const q = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];

test(
  'drift detector calibration',
  async () => {
    const grid = (process.env.DRIFT_CAL_GRID ?? '0.25:20,0.25:25,0.25:30,0.5:12,0.5:14').split(',').map((x) => x.split(':').map(Number));
    const lines: string[] = [];
    for (const [k, h] of grid) {
      const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
      const p: CusumParams = {
        ...DRIFT_CUSUM,
        k,
        h,
        warmup: env('DRIFT_CAL_WARMUP', DRIFT_CUSUM.warmup),
        zClamp: env('DRIFT_CAL_ZCLAMP', DRIFT_CUSUM.zClamp),
        kHeld: env('DRIFT_CAL_KHELD', DRIFT_CUSUM.kHeld),
        hHeld: env('DRIFT_CAL_HHELD', DRIFT_CUSUM.hHeld),
        holdEnd: env('DRIFT_CAL_HOLD_END', DRIFT_CUSUM.holdEnd),
        holdMargin: env('DRIFT_CAL_HOLD_MARGIN', DRIFT_CUSUM.holdMargin),
        holdMax: env('DRIFT_CAL_HOLD_MAX', DRIFT_CUSUM.holdMax),
        priorSd: env('DRIFT_CAL_PRIOR_SD', DRIFT_CUSUM.priorSd),
        priorDf: env('DRIFT_CAL_PRIOR_DF', DRIFT_CUSUM.priorDf),
      };
      const fa = NULL_CASES.map(([name, src], i) => `${name}: ${falseAlarms(src, p, i + 1).toFixed(2)}`);
      const dl = CHANGE_CASES.map(([name, b, a], i) => {
        const d = delays(b, a, p, i + 1);
        return `${name}: median ${q(d, 0.5)}, p90 ${q(d, 0.9)}`;
      });
      const [name, b, a] = CHANGE_CASES[2];
      const starved = delays(b, a, p, 3, true);
      dl.push(`${name} after 3–8 samples (starved): median ${q(starved, 0.5)}, p75 ${q(starved, 0.75)}, p90 ${q(starved, 0.9)}`);
      // The same held reference with no change after it: a false alarm of a starved model's re-tries.
      const early = delays(b, a, p, 5, true, false);
      dl.push(`${name} after 3–8 samples, served again without a gap: median ${q(early, 0.5)}, p75 ${q(early, 0.75)}, p90 ${q(early, 0.9)}`);
      const unchanged = delays(b, b, p, 4, true);
      const within = (m: number) => unchanged.filter((d) => d <= m).length;
      fa.push(`legacy-7b held after 3–8 samples, unchanged: ${within(100)} / ${within(2_000)} of ${RUNS} streams alarm within 100 / 2,000 samples, the hold lasting ${heldLength(b, p).toFixed(1)} samples on average`);
      dl[dl.length - 2] += `, ${starved.filter((d) => Number.isFinite(d)).length} of ${RUNS} found (by the one hold)`;
      lines.push(`k ${k}, h ${h}\n  false alarms per 10,000 samples: ${fa.join('; ')}\n  samples to detect: ${dl.join('; ')}`);
      process.stdout.write(lines[lines.length - 1] + '\n');
    }
  },
  60 * 60 * 1000,
);
