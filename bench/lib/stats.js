'use strict';
/** Percentiles of raw samples and the median/min/max summary of a figure over several runs. */

/** Sorts in place (Float64Array for speed) and returns a function p(q) → the q-th percentile. */
function percentiles(samples) {
  const a = Float64Array.from(samples).sort();
  return (q) => {
    if (a.length === 0) return null;
    const i = Math.min(a.length - 1, Math.max(0, Math.ceil((q / 100) * a.length) - 1));
    return a[i];
  };
}

/** { median, min, max } of one figure over runs (nulls ignored; null when none). */
function summary(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return { median: null, min: null, max: null };
  const mid = Math.floor(v.length / 2);
  const median = v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return { median: round(median), min: round(v[0]), max: round(v[v.length - 1]) };
}

function round(x, digits = 4) {
  if (x === null || x === undefined || !Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Summaries of each numeric key of per-run records: { key: { median, min, max } }. */
function summarise(runs, keys) {
  const out = {};
  for (const k of keys) out[k] = summary(runs.map((r) => r[k]));
  return out;
}

module.exports = { percentiles, summary, summarise, round };
