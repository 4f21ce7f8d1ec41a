/**
 * Smoke test of the chaos soak (`npm run soak:chaos`): a short run of `node bench/chaos.js` with a
 * compressed fault schedule, as a child process. It starts its own Postgres and Redis (it has to
 * freeze, kill and stop them), builds the gateway into bench/.build/, starts the fake upstream and
 * two replicas. Checks that every fault was injected, that every phase saw traffic, and that the
 * report carries every figure. Latencies and RSS are never asserted (they belong to the full run);
 * what must hold whatever the machine's load is asserted: no trace lost or duplicated, no failed
 * experiments write that changed anything, and chat and embeddings never answering 5xx or failing
 * to connect.
 */
import { readFileSync } from 'node:fs';
import { benchScript } from './support/bench-script';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './support/real-servers';


jest.setTimeout(180_000);

const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

// The soak needs the Postgres and Redis binaries; scripts/test.js sets these URLs exactly when it found them.
const describeWithServers: jest.Describe = TEST_DATABASE_URL && TEST_REDIS_URL ? describe : describe.skip;

describeWithServers('npm run soak:chaos (compressed schedule)', () => {
  const script = benchScript('gw-chaos-test-', 'chaos.json', (out) => ['bench/chaos.js', '--seconds', '24', '--redis-freeze', '2', '--redis-dead', '2', '--pg-down', '4', '--rate', '20', '--explain-every', '3', '--experiments-every', '2', '--drain', '40', `--out=${out}`]);
  let report: any;
  let stdout = '';
  let stderr = '';
  let code: number | null = null;

  beforeAll(async () => {
    ({ code, stdout, stderr } = await script.run());
    // Exit 1 is a failed pass criterion (the report is written); 2 is a harness error.
    if (code === 0 || code === 1) report = JSON.parse(readFileSync(script.out, 'utf8'));
  });

  afterAll(() => script.stop());

  it('runs to the end and writes a report', () => {
    if (code !== 0 && code !== 1) throw new Error(`soak exited ${code}\nstderr:\n${stderr.slice(-6000)}`);
    expect(report.meta).toMatchObject({ command: expect.stringContaining('npm run soak:chaos'), commit: expect.any(String), rate_per_s: 20 });
    expect(stdout).toContain('### Chaos soak');
    expect(stdout).toMatch(/\*\*(PASS|FAIL)\*\*/);
  });

  it('injects every fault, in order', () => {
    const whats: string[] = report.events.map((e: any) => e.what);
    const order = ['redis SIGSTOP', 'redis SIGCONT', 'redis SIGKILL', 'redis restarted', 'postgres stopped', 'postgres started', 'replica B out of rotation', 'replica B exited', 'replica B back in rotation', 'traffic stops', 'trace buffers drained'];
    const at = order.map((w) => whats.findIndex((x) => x.startsWith(w)));
    expect(order.filter((_, k) => at[k] < 0)).toEqual([]);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    const b = report.rss.find((r: any) => r.replica === 'B');
    expect(b.processes).toHaveLength(2);
    expect(b.processes[1].pid).not.toBe(b.processes[0].pid);
  });

  it('every phase saw traffic and has its latency figures; requests by endpoint and status add up', () => {
    for (const phase of ['warmup', 'baseline', 'redis-frozen', 'redis-killed', 'postgres-down', 'postgres-back', 'replica-restart', 'recovery']) {
      const p = report.phases[phase];
      expect(p?.requests).toBeGreaterThan(0);
      for (const k of ['p50_ms', 'p99_ms', 'max_ms']) expect(isNum(p[k])).toBe(true);
      let sum = 0;
      for (const e of Object.values<any>(p.endpoints)) {
        expect(isNum(e.p50_ms) && isNum(e.p99_ms)).toBe(true);
        const n = Object.values<number>(e.statuses).reduce((a, x) => a + x, 0);
        expect(n).toBe(e.requests);
        sum += n;
      }
      expect(sum).toBe(p.requests);
    }
    const endpoints = new Set(Object.values<any>(report.phases).flatMap((p) => Object.keys(p.endpoints)));
    for (const e of ['chat', 'stream', 'embeddings', 'feedback', 'explain', 'experiments-create', 'experiments-list', 'experiments-rollback']) expect(endpoints).toContain(e);
  });

  it('reports traces, experiments and RSS as numbers', () => {
    const t = report.traces;
    expect(t.checked).toBeGreaterThan(100);
    for (const k of ['lost', 'duplicated', 'rows_for_non_2xx', 'dropped_metric', 'write_failures_metric', 'spooled_metric', 'replayed_metric', 'spool_bytes_left']) expect(isNum(t[k])).toBe(true);
    const e = report.experiments;
    expect(e.calls).toBeGreaterThan(3);
    // The calls made while Postgres is down are writes: at least one answered 503 and was checked.
    expect(e.failed_writes_checked).toBeGreaterThan(0);
    for (const k of ['failed_writes', 'failed_writes_checked', 'changed_by_failed_writes', 'unexplained_changes', 'indeterminate']) expect(isNum(e[k])).toBe(true);
    for (const r of report.rss) for (const p of r.processes) for (const k of ['rss_start_mib', 'rss_peak_mib', 'rss_end_mib', 'growth_mib']) expect(isNum(p[k])).toBe(true);
    expect(report.criteria.length).toBeGreaterThanOrEqual(8);
    expect(typeof report.pass).toBe('boolean');
  });

  it('no trace lost or duplicated, no failed experiments write changed anything, chat and embeddings never 5xx', () => {
    expect({ lost: report.traces.lost, duplicated: report.traces.duplicated, lost_examples: report.traces.lost_examples }).toEqual({ lost: 0, duplicated: 0, lost_examples: [] });
    // The Postgres outage's traces went through the trace spool and were all replayed, once each.
    expect(report.traces.outage.checked).toBeGreaterThan(0);
    expect({ lost: report.traces.outage.lost, duplicated: report.traces.outage.duplicated, spool_bytes_left: report.traces.spool_bytes_left }).toEqual({ lost: 0, duplicated: 0, spool_bytes_left: 0 });
    expect(report.traces.spooled_metric).toBeGreaterThan(0);
    expect(report.traces.replayed_metric).toBeGreaterThanOrEqual(report.traces.spooled_metric);
    expect(report.experiments.changed_by_failed_writes).toBe(0);
    expect(report.experiments.unexplained_changes).toBe(0);
    const served = report.incidents.filter((g: any) => ['chat', 'stream', 'embeddings'].includes(g.endpoint) && (typeof g.status !== 'number' || g.status >= 500));
    expect(served).toEqual([]);
  });
});
