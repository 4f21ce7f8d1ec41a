/**
 * Smoke test of the export section of `npm run bench:analytics`: `node bench/analytics.js --quick
 * --only=export` as a child process (its own throwaway Postgres, a build of the gateway, 50,000
 * traces, `gateway export --format parquet` of all of them). Checks the report's shape and that what
 * DuckDB read back equals the store. Speed and memory are never asserted here: they belong to the
 * bench (README "Decisions export").
 */
import { readFileSync } from 'node:fs';
import { benchScript } from './support/bench-script';
import { TEST_DATABASE_URL } from './support/real-servers';

jest.setTimeout(600_000);

const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

// The bench needs the Postgres binaries; scripts/test.js sets this URL exactly when it found them.
const describeWithPostgresBinaries: jest.Describe = TEST_DATABASE_URL ? describe : describe.skip;

describeWithPostgresBinaries('npm run bench:analytics -- --quick --only=export', () => {
  const script = benchScript('gw-export-bench-test-', 'analytics.json', (out) => ['bench/analytics.js', '--quick', '--only=export', `--out=${out}`]);
  let report: any;
  let stdout = '';
  let stderr = '';
  let code: number | null = null;

  beforeAll(async () => {
    ({ code, stdout, stderr } = await script.run());
    if (code === 0) report = JSON.parse(readFileSync(script.out, 'utf8'));
  });

  afterAll(() => script.stop());

  it('exits 0 with the export figures: rows/s and RSS at the start and at the peak', () => {
    if (code !== 0) throw new Error(`bench:analytics exited ${code}\nstderr:\n${stderr.slice(-6000)}`);
    expect(report.meta).toMatchObject({ mode: 'quick', phases: ['export'] });
    for (const k of ['export_rows_per_s', 'export_rss_start_mib', 'export_rss_peak_mib']) {
      if (!isNum(report[k])) throw new Error(`${k} is not a number: ${JSON.stringify(report[k])}`);
    }
    expect(report.export_rss_peak_mib).toBeGreaterThanOrEqual(report.export_rss_start_mib);
  });

  it('every stored trace was exported and DuckDB read the Parquet back equal to the store', () => {
    const e = report.details.export;
    expect(e.rows).toBe(e.store_rows);
    expect(e.rows).toBeGreaterThanOrEqual(50_000);
    expect(e.files).toBeGreaterThan(0);
    expect(e.verified).toBe(true);
  });

  it('prints the table row', () => {
    expect(stdout).toContain('`gateway export --format parquet` of 50,000 traces');
  });
});
