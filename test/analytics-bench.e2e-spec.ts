/**
 * Smoke test of `npm run bench:analytics`: a quick run of `node bench/analytics.js --quick` as a child
 * process (it starts its own throwaway Postgres, builds the gateway into bench/.build/, loads two small
 * sizes of traces and feedback, runs the learning beats, a restart, `gateway prune`, the CPU runs and
 * a short Postgres outage under load, the Admin API's reads). Checks the report's shape — every figure present as a number —
 * and that each phase ran: the beats were measured, the pruned day's partition is gone, the outage
 * went through the trace spool. Timings are never asserted: they belong to the bench. That no trace is
 * lost or duplicated across the outage holds whatever the machine's load, so it is asserted.
 */
import { readFileSync } from 'node:fs';
import { benchScript } from './support/bench-script';
import { TEST_DATABASE_URL } from './support/real-servers';

jest.setTimeout(600_000);

const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

// The bench needs the Postgres binaries; scripts/test.js sets this URL exactly when it found them.
const describeWithPostgresBinaries: jest.Describe = TEST_DATABASE_URL ? describe : describe.skip;

describeWithPostgresBinaries('npm run bench:analytics -- --quick', () => {
  const script = benchScript('gw-analytics-test-', 'analytics.json', (out) => ['bench/analytics.js', '--quick', `--out=${out}`]);
  let report: any;
  let stdout = '';
  let stderr = '';
  let code: number | null = null;

  beforeAll(async () => {
    ({ code, stdout, stderr } = await script.run());
    if (code === 0) report = JSON.parse(readFileSync(script.out, 'utf8'));
  });

  afterAll(() => script.stop());

  it('exits 0 and writes a report with the machine, the commit, the command and every top-level figure', () => {
    if (code !== 0) throw new Error(`bench:analytics exited ${code}\nstderr:\n${stderr.slice(-6000)}`);
    expect(report.meta).toMatchObject({ command: expect.stringContaining('npm run bench:analytics'), commit: expect.any(String), mode: 'quick' });
    expect(report.meta.machine).toMatchObject({ node: process.version, cores: expect.any(Number) });
    for (const k of ['beat_p50_ms_1m', 'beat_p99_ms_1m', 'beat_p50_ms_10m', 'beat_p99_ms_10m', 'first_beat_ms_10m', 'prune_day_ms', 'bytes_per_trace', 'chat_cpu_us_per_req', 'chat_cpu_us_per_req_during_beats', 'lost_traces', 'duplicated_traces', 'admin_p95_ms_1m', 'admin_p95_ms_10m']) {
      if (!isNum(report[k])) throw new Error(`${k} is not a number: ${JSON.stringify(report[k])}`);
    }
  });

  it('every phase ran: beats at both sizes, the restart, storage, prune, CPU with and without beats, the outage', () => {
    const d = report.details;
    expect(d.sizes.map((s: any) => s.traces)).toEqual(report.meta.shape.sizes);
    for (const s of d.sizes) {
      expect(s.beats).toHaveLength(report.meta.beats);
      expect(s.backfill_beats).toBeGreaterThan(0);
    }
    expect(d.storage.traces).toBeGreaterThan(report.meta.shape.sizes.at(-1));
    // The same traces in the layout before rollups and day partitions, for the storage comparison.
    expect(d.storage.before).toMatchObject({ traces: report.meta.shape.sizes.at(-1), bytes_per_trace: expect.any(Number) });
    expect(report.bytes_per_trace_before).toBe(d.storage.before.bytes_per_trace);
    expect(d.prune).toMatchObject({ partition_dropped: true });
    expect(d.prune.traces_in_day).toBeGreaterThan(0);
    for (const side of ['reference', 'beating']) expect(d.cpu[side]).toMatchObject({ non2xx: 0, errors: 0 });
    expect(d.cpu.reference.requests).toBeGreaterThan(0);
    expect(d.outage.answered_2xx).toBeGreaterThan(0);
    expect(d.outage.metrics.gateway_traces_spooled_total).toBeGreaterThan(0);
    expect(d.outage.left).toEqual({ depth: 0, spool: 0 });
  });

  it('the Admin API phase: usage rollups rebuilt, every read answered 200 at both sizes, p50 and p95 per read', () => {
    const admin = report.details.admin;
    expect(admin.map((a: any) => a.traces)).toEqual(report.meta.shape.sizes);
    for (const a of admin) {
      expect(a.usage_rollup_rows).toBeGreaterThan(0);
      expect(a.all_200).toBe(true);
      expect(a.reads.map((r: any) => r.name)).toEqual(admin[0].reads.map((r: any) => r.name));
      expect(a.reads.length).toBeGreaterThanOrEqual(20);
      for (const r of a.reads) {
        expect(r.statuses).toEqual([200]);
        if (!isNum(r.p50_ms) || !isNum(r.p95_ms)) throw new Error(`${r.name}: ${JSON.stringify(r)}`);
      }
      // The searches found what they look for: a loaded trace by its request id, its session's four.
      expect(a.reads.find((r: any) => r.name === 'traces 30d, by request id').rows).toBe(1);
      expect(a.reads.find((r: any) => r.name === 'traces 30d, by session id').rows).toBe(4);
    }
    expect(stdout).toContain('| Admin API read (p50 / p95 ms) |');
  });

  it('no trace lost or duplicated across the Postgres outage', () => {
    expect({ lost: report.lost_traces, duplicated: report.duplicated_traces }).toEqual({ lost: 0, duplicated: 0 });
  });

  it('prints the Markdown table', () => {
    expect(stdout).toContain('### Analytics at volume');
    expect(stdout).toContain('| figure | value |');
  });
});
