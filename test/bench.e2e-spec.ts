/**
 * Smoke test of the benchmark harness: a quick run of `node bench/run.js --quick --soak`
 * as a child process (it builds the gateway into bench/.build/, starts the fake upstream and the
 * gateway on loopback, drives a few hundred milliseconds of each load). Checks the report's shape —
 * every section present with numbers — and that every request succeeded. The figures themselves are
 * never asserted: they belong to the bench, not to a timed test.
 */
import { readFileSync } from 'node:fs';
import { benchScript } from './support/bench-script';


jest.setTimeout(300_000);

type Summary = { median: number; min: number; max: number };

const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
const expectSummary = (s: Summary, what: string) => {
  for (const k of ['median', 'min', 'max'] as const) {
    if (!isNum(s?.[k])) throw new Error(`${what}.${k} is not a number: ${JSON.stringify(s)}`);
  }
};

describe('npm run bench -- --quick --soak', () => {
  const script = benchScript('gw-bench-test-', 'report.json', (out) => ['bench/run.js', '--quick', '--soak', `--out=${out}`]);
  let report: any;
  let stdout = '';
  let stderr = '';
  let code: number | null = null;

  beforeAll(async () => {
    ({ code, stdout, stderr } = await script.run());
    if (code === 0) report = JSON.parse(readFileSync(script.out, 'utf8'));
  });

  afterAll(() => script.stop());

  it('exits 0 and writes a report with the machine, the command and every section', () => {
    if (code !== 0) throw new Error(`bench exited ${code}\nstderr:\n${stderr.slice(-6000)}`);
    expect(report.meta).toMatchObject({
      date: expect.any(String),
      command: expect.stringContaining('npm run bench'),
      node: process.version,
      cores: expect.any(Number),
      autocannon: expect.any(String),
      mode: 'quick',
    });
    expect(Object.keys(report.sections).sort()).toEqual(['chat', 'memory', 'responses', 'soak', 'stream']);
    expect(report.budget.length).toBeGreaterThanOrEqual(6);
  });

  it('non-streaming chat: each concurrency has req/s, latency, added latency and CPU per request as numbers', () => {
    const levels = report.sections.chat.levels;
    expect(levels.map((l: any) => l.connections)).toEqual([1, 32, 128]);
    for (const l of levels) {
      for (const side of ['direct', 'gateway']) {
        for (const k of ['rps', 'p50', 'p90', 'p99', 'cpu_us_per_req']) expectSummary(l[side][k], `chat ${l.connections} ${side}.${k}`);
        expect(l.runs[side].length).toBeGreaterThanOrEqual(3);
      }
      for (const k of ['p50', 'p90', 'p99']) expectSummary(l.added_ms[k], `chat ${l.connections} added.${k}`);
      expectSummary(l.rps_ratio, 'rps_ratio');
    }
  });

  it('responses: Responses API and chat CPU per request at each concurrency, the ratio, no failed request', () => {
    const levels = report.sections.responses.levels;
    expect(levels.map((l: any) => l.connections)).toEqual([1, 32, 128]);
    for (const l of levels) {
      for (const side of ['chat', 'responses']) {
        for (const k of ['rps', 'p50', 'p99', 'cpu_us_per_req']) expectSummary(l[side][k], `responses ${l.connections} ${side}.${k}`);
        expect(l.totals[side]).toMatchObject({ non2xx: 0, errors: 0 });
        expect(l.totals[side].ok).toBeGreaterThan(0);
      }
      expectSummary(l.cpu_ratio, `responses ${l.connections} cpu_ratio`);
    }
    expect(stdout).toContain('**Responses API**');
  });

  it('streaming: added TTFB and added time between chunks as numbers, every chunk delivered in order', () => {
    for (const l of report.sections.stream.levels) {
      for (const k of ['ttfb_p50', 'ttfb_p99', 'transit_p50', 'transit_p99', 'between_chunks_p50', 'between_chunks_p99']) {
        expectSummary(l.added_ms[k], `stream ${l.concurrency} added.${k}`);
      }
      for (const side of ['direct', 'gateway']) {
        expect(l.totals[side].streams).toBeGreaterThan(0);
        expect(l.totals[side].chunks).toBeGreaterThan(0);
        expect(l.totals[side].missing).toBe(0);
      }
    }
  });

  it('memory and soak: RSS figures as numbers, every slow stream opened', () => {
    const mem = report.sections.memory.levels;
    expect(mem.length).toBe(2);
    for (const l of mem) {
      expect(l.open).toBe(l.requested);
      expect(l.pending).toBe(0);
      for (const k of ['rss_before_mib', 'rss_mib', 'rss_after_close_mib']) expect(isNum(l[k])).toBe(true);
    }
    // Idle after the warm-up: RSS right after the load and after the idle time, sampled on the way.
    const idle = report.sections.memory.idle;
    expect(isNum(idle.rss_after_load_mib)).toBe(true);
    expect(isNum(idle.rss_idle_mib)).toBe(true);
    expect(idle.curve.length).toBeGreaterThan(0);
    const soak = report.sections.soak;
    for (const k of ['rss_mib']) {
      expect(isNum(soak.before[k])).toBe(true);
      expect(isNum(soak.after[k])).toBe(true);
    }
    expect(isNum(soak.rss_growth_mib)).toBe(true);
    expect(soak.json.ok).toBeGreaterThan(0);
    expect(soak.streams.completed).toBeGreaterThan(0);
  });

  it('every request succeeded: non-2xx = 0 and errors = 0 in every section', () => {
    const failures: string[] = [];
    const zero = (what: string, n: number) => n !== 0 && failures.push(`${what} = ${n}`);
    for (const l of report.sections.chat.levels) {
      for (const side of ['direct', 'gateway']) {
        const t = l.totals[side];
        zero(`chat ${l.connections} ${side} non2xx`, t.non2xx);
        zero(`chat ${l.connections} ${side} errors`, t.errors);
        zero(`chat ${l.connections} ${side} timeouts`, t.timeouts);
        expect(t.ok).toBeGreaterThan(0);
      }
    }
    for (const l of report.sections.stream.levels) {
      for (const side of ['direct', 'gateway']) {
        zero(`stream ${l.concurrency} ${side} non2xx`, l.totals[side].non2xx);
        zero(`stream ${l.concurrency} ${side} errors`, l.totals[side].errors);
      }
    }
    for (const l of report.sections.memory.levels) {
      zero(`memory ${l.requested} non2xx`, l.non2xx);
      zero(`memory ${l.requested} errors`, l.errors);
    }
    const s = report.sections.soak;
    zero('soak json non2xx', s.json.non2xx);
    zero('soak json errors', s.json.errors);
    zero('soak streams non2xx', s.streams.non2xx);
    zero('soak streams errors', s.streams.errors);
    expect(failures).toEqual([]);
  });

  it('prints the Markdown tables', () => {
    for (const heading of ['**Non-streaming chat**', '**Streaming**', '**Memory**', '**Soak**', '**Budget**']) {
      expect(stdout).toContain(heading);
    }
    expect(stdout).toContain(`Node ${process.version}`);
  });
});
