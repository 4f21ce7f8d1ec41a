/**
 * Smoke test of `npm run fuzz`: `node bench/fuzz.js --quick` as a child process (it builds the
 * gateway into bench/.build/, starts the bench fake upstream and the gateway, sends a few dozen
 * generated requests per endpoint and every raw-socket case). Checks that the run passes and that
 * its report has every endpoint, every raw case and the process figures; the rates are never asserted.
 */
import { readFileSync } from 'node:fs';
import { benchScript } from './support/bench-script';

const ENDPOINTS = [
  'chat', 'chat_stream', 'embeddings', 'explain', 'feedback', 'experiments_create', 'experiments_list', 'experiments_rollback', 'health', 'metrics',
  'responses', 'responses_stream', 'models', 'models_retrieve',
];

jest.setTimeout(300_000);

describe('npm run fuzz -- --quick', () => {
  const script = benchScript('gw-fuzz-test-', 'report.json', (out) => ['bench/fuzz.js', '--quick', `--out=${out}`]);
  let report: any;
  let stdout = '';
  let stderr = '';
  let code: number | null = null;

  beforeAll(async () => {
    ({ code, stdout, stderr } = await script.run());
    report = JSON.parse(readFileSync(script.out, 'utf8'));
  });

  afterAll(() => script.stop());

  it('exits 0 with a passing report', () => {
    if (code !== 0) throw new Error(`fuzz exited ${code}\nstdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-4000)}`);
    expect(report.pass).toBe(true);
    expect(report.failures).toEqual([]);
    expect(report.meta).toMatchObject({ mode: 'quick', node: process.version, seed: expect.any(Number), cases_per_endpoint: 60 });
  });

  it('every endpoint got its cases, each answered below 500 with the envelope on every 4xx', () => {
    expect(Object.keys(report.endpoints)).toEqual(ENDPOINTS);
    for (const name of ENDPOINTS) {
      const s = report.endpoints[name];
      expect(`${name} ${s.cases + s.skipped}`).toBe(`${name} 60`);
      expect(`${name} ${s.fivexx} ${s.non_envelope_4xx} ${s.bad_2xx} ${s.errors}`).toBe(`${name} 0 0 0 0`);
      const answered = Object.values(s.statuses as Record<string, number>).reduce((a, b) => a + b, 0);
      expect(answered).toBe(s.cases);
      expect(s.rps).toBeGreaterThan(0);
    }
  });

  it('every raw-socket case passed; the slow-loris socket was closed by the server', () => {
    expect(report.raw.length).toBeGreaterThanOrEqual(30);
    expect(report.raw.filter((r: { ok: boolean }) => !r.ok)).toEqual([]);
    const loris = report.raw.find((r: { name: string }) => r.name.startsWith('slow-loris'));
    expect(loris.closed_ms).toBeGreaterThan(0);
    const pipelined = report.raw.find((r: { name: string }) => r.name.startsWith('pipelined'));
    expect(pipelined.answers).toEqual(['200', '200', '200', '200']);
  });

  it('the gateway is healthy afterwards, with RSS before and after; stdout has the tables', () => {
    expect(report.health_after).toBe(200);
    expect(typeof report.rss_before_mib).toBe('number');
    expect(typeof report.rss_after_mib).toBe('number');
    expect(stdout).toContain('| endpoint | cases | statuses |');
    expect(stdout).toContain('| raw case | answers |');
    expect(stdout).toContain('PASS');
  });
});
