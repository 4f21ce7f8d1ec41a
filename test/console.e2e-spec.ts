/**
 * The operator console (docs/architecture.md "Console") in a real browser: Debian's Chromium driven
 * by playwright-core against the gateway with fake upstreams and seeded traffic. Every figure the
 * pages show is read back and compared with what the API answers and with what the test seeded, so
 * a wrong API answer fails here as surely as a missing element. No page may log a console error or
 * throw (the API errors a step causes on purpose are named). Each page's screenshot is taken (a
 * page that cannot be drawn fails here) and written to a temporary folder; with CONSOLE_SCREENSHOTS=docs
 * to docs/console/, which the README's "Console" shows, so that a test run leaves the clone unchanged. Also: the static serving's headers (CSP,
 * caching, precompressed bodies), `console.enabled: false`, and the first load's size budget.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { OpenAiFake } from './fakes/openai-fake';
import { startTestApp, TestApp } from './support/app';
import { launchChromium, unexpected, watchedPage, type WatchedPage } from './support/browser';

const ROOT = join(__dirname, '..');
const DIST = join(ROOT, 'console', 'dist');
const SHOTS = process.env.CONSOLE_SCREENSHOTS === 'docs' ? join(ROOT, 'docs', 'console') : join(tmpdir(), `gw-console-shots-${process.pid}`);
/** The first load's budget: JavaScript and CSS, gzip. */
const BUDGET_BYTES = 300 * 1024;

const ADMIN = 'gw-console-admin-key';
const RW = 'gw-console-rw-key';
const TZ = 'Asia/Kolkata';

const yaml = (primary: string, secondary: string, flaky: string) => `
providers:
  primary: { family: openai, base_url: "${primary}", api_key: "sk-primary" }
  secondary: { family: openai, base_url: "${secondary}", api_key: "sk-secondary" }
  flaky: { family: openai, base_url: "${flaky}", api_key: "sk-flaky" }
models:
  fast: { provider: primary, cost: { input_per_mtok: 1, output_per_mtok: 2 }, quality: 0.7 }
  smart: { provider: secondary, cost: { input_per_mtok: 3, output_per_mtok: 6 }, quality: 0.8 }
  shaky: { provider: flaky }
routes:
  - { name: main, models: [auto], strategy: ordered, targets: [primary/fast, secondary/smart] }
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys:
      - { id: acme-admin, key: "${ADMIN}", permissions: [read, write, admin] }
      - { id: acme-rw, key: "${RW}", permissions: [read, write] }
`;

/** Builds the console when its build is missing or older than its sources (a run of this file alone). */
function ensureBuilt(): void {
  const newest = (dir: string): number =>
    readdirSync(dir).reduce((m, name) => {
      const full = join(dir, name);
      const s = statSync(full);
      return Math.max(m, s.isDirectory() ? newest(full) : s.mtimeMs);
    }, 0);
  const index = join(DIST, 'index.html');
  if (existsSync(index) && statSync(index).mtimeMs >= newest(join(ROOT, 'console', 'src'))) return;
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-console.js')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error('console build failed');
}

/** The JavaScript and CSS index.html loads. */
function firstLoad(): string[] {
  const html = readFileSync(join(DIST, 'index.html'), 'utf8');
  return [...new Set([...html.matchAll(/(?:src|href)="\/console\/([^"]+\.(?:js|css))"/g)].map((m) => m[1]))];
}

// A browser, two gateways and a fake upstream on a machine the rest of the suite shares.
jest.setTimeout(90_000);

describe('operator console', () => {
  const primary = new OpenAiFake();
  const secondary = new OpenAiFake();
  /** Always fails: five failures in a row open its circuit breaker. */
  const flaky = new OpenAiFake().always({ errorStatus: 500 });
  let t: TestApp;
  let browser: Browser;
  let w: WatchedPage;
  let page: Page;
  /** What the test sent through chat: the figures the overview must add up to. */
  const seeded = { requests: 0, errors: 0, fallbacks: 0 };

  const api = async (method: string, path: string, body?: unknown, key = ADMIN, headers: Record<string, string> = {}) => {
    const r = await fetch(`${t.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, headers: r.headers, body: text ? JSON.parse(text) : undefined };
  };
  const chat = async (requestId: string, session?: string, model = 'auto') => {
    const r = await api('POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'Hi' }] }, ADMIN, {
      'x-request-id': requestId,
      ...(session ? { 'gateway-session-id': session } : {}),
    });
    seeded.requests++;
    if (r.status >= 400) seeded.errors++;
    if (r.headers.get('gateway-fallback-used') === 'true') seeded.fallbacks++;
    return r;
  };
  const flush = () => t.app.get(DecisionTraceWriter).flush();
  const text = async (selector: string) => ((await page.locator(selector).first().textContent()) ?? '').trim();
  const attr = async (selector: string, name: string) => page.locator(selector).first().getAttribute(name);
  const go = async (title: string) => {
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: title, exact: true }).click();
    await page.locator(`main[data-page=${title.toLowerCase()}]`).waitFor();
  };
  // The new key's secret (a throwaway key of a throwaway gateway, revoked at once) is masked all the same.
  const shot = (name: string, p: Page = page) => p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true, mask: [p.locator('[data-testid=new-key-secret]')] });
  /** No console error or uncaught exception since the last check, but for the API errors named. */
  const clean = (expected: Array<{ status: number; path: string }> = []) => {
    const left = unexpected(w.problems, expected);
    w.problems.length = 0;
    expect(left).toEqual([]);
  };

  beforeAll(async () => {
    ensureBuilt();
    mkdirSync(SHOTS, { recursive: true });
    await primary.start();
    await secondary.start();
    await flaky.start();
    t = await startTestApp({ yaml: yaml(primary.url, secondary.url, flaky.url) });
    // Traffic on `auto`: 6 answered by the first target, 3 rescued by the fallback, 2 failed on both;
    // a success between failures, so the first target's breaker stays closed (5 failures in a row open it).
    for (let i = 1; i <= 5; i++) {
      expect((await chat(`seed-ok-${i}`)).status).toBe(200);
      primary.next({ errorStatus: 500 });
      if (i <= 3) expect((await chat(`seed-fb-${i}`)).status).toBe(200);
      else {
        secondary.next({ errorStatus: 502 });
        expect((await chat(`seed-err-${i - 3}`)).status).toBe(502);
      }
    }
    expect((await chat('seed-ok-6')).status).toBe(200);
    expect(seeded).toEqual({ requests: 11, errors: 2, fallbacks: 3 });
    // The flaky provider: 5 failures open its breaker, the 6th request finds it open (503, no call).
    for (let i = 1; i <= 6; i++) expect((await chat(`seed-flaky-${i}`, undefined, 'shaky')).status).toBe(i <= 5 ? 502 : 503);
    expect(flaky.requests).toHaveLength(5);
    expect(seeded).toEqual({ requests: 17, errors: 8, fallbacks: 3 });
    await flush();
    browser = await launchChromium();
    w = await watchedPage(browser, { timezoneId: TZ });
    page = w.page;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await primary.stop();
    await secondary.stop();
    await flaky.stop();
  });

  it('serves the console on /console only, with its CSP, immutable hashed assets and precompressed bodies', async () => {
    const index = await fetch(`${t.url}/console`, { headers: { 'accept-encoding': 'br, gzip' } });
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = index.headers.get('content-security-policy') ?? '';
    for (const d of ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]) expect(csp).toContain(d);
    expect(csp).not.toContain('unsafe-inline');
    expect(index.headers.get('cache-control')).toBe('no-cache');
    expect(index.headers.get('vary')).toBe('Accept-Encoding');
    const html = await index.text();
    // No inline script: every <script> has a src on this origin.
    expect([...html.matchAll(/<script\b[^>]*>/g)].every((m) => /src="\/console\//.test(m[0]))).toBe(true);
    expect(html).not.toMatch(/https?:\/\//);

    const [js] = firstLoad().filter((f) => f.endsWith('.js'));
    const raw = readFileSync(join(DIST, js));
    const get = (encoding: string) => fetch(`${t.url}/console/${js}`, { headers: { 'accept-encoding': encoding } });
    // fetch decodes the body: content-length is what crossed the wire.
    const br = await get('gzip;q=0.5, br');
    expect([br.status, br.headers.get('content-encoding'), br.headers.get('cache-control')]).toEqual([200, 'br', 'public, max-age=31536000, immutable']);
    expect(Buffer.from(await br.arrayBuffer()).equals(raw)).toBe(true);
    expect(Number(br.headers.get('content-length'))).toBe(readFileSync(join(DIST, `${js}.br`)).length);
    const gz = await get('gzip');
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(Buffer.from(await gz.arrayBuffer()).equals(raw)).toBe(true);
    const plain = await get('identity');
    expect([plain.headers.get('content-encoding'), Number(plain.headers.get('content-length'))]).toEqual([null, raw.length]);
    const refused = await get('br;q=0, gzip;q=0');
    expect(refused.headers.get('content-encoding')).toBeNull();
    const again = await fetch(`${t.url}/console/${js}`, { headers: { 'accept-encoding': 'br', 'if-none-match': br.headers.get('etag')! } });
    expect(again.status).toBe(304);

    const missing = await fetch(`${t.url}/console/assets/nope.js`);
    expect([missing.status, missing.headers.get('content-security-policy')]).toEqual([404, expect.stringContaining("default-src 'self'")]);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
    const traversal = await fetch(`${t.url}/console/..%2Fpackage.json`);
    expect(traversal.status).toBe(404);
    // The API is not behind it: no console headers there.
    const models = await api('GET', '/v1/models');
    expect([models.status, models.headers.get('content-security-policy')]).toEqual([200, null]);
  });

  it('is not served with console.enabled false', async () => {
    const off = await startTestApp({ yaml: `${yaml(primary.url, secondary.url, flaky.url)}\nconsole: { enabled: false }\n` });
    try {
      for (const path of ['/console', `/console/${firstLoad()[0]}`]) {
        const r = await fetch(`${off.url}${path}`);
        expect([path, r.status, ((await r.json()) as { error: { code: string } }).error.code]).toEqual([path, 404, 'not_found']);
      }
    } finally {
      await off.close();
    }
  });

  it(`keeps its first load under ${BUDGET_BYTES / 1024} KiB of gzip JavaScript and CSS`, () => {
    const files = firstLoad();
    expect(files.some((f) => f.endsWith('.js'))).toBe(true);
    expect(files.some((f) => f.endsWith('.css'))).toBe(true);
    const gzip = files.reduce((n, f) => n + gzipSync(readFileSync(join(DIST, f)), { level: 9 }).length, 0);
    process.stdout.write(`console first load: ${(gzip / 1024).toFixed(1)} KiB gzip\n`);
    expect(gzip).toBeLessThan(BUDGET_BYTES);
  });

  it('signs in with an admin key only, kept in sessionStorage and sent as the bearer header', async () => {
    await page.goto(`${t.url}/console/`);
    await page.locator('[data-testid=signin]').waitFor();
    const input = page.getByLabel('API key');
    // The API's own refusals, as it words them.
    await input.fill('gw-no-such-key');
    await page.keyboard.press('Enter');
    await page.locator('[data-testid=error][data-status="401"]').waitFor();
    const wrong = await api('GET', '/v1/admin/keys', undefined, 'gw-no-such-key');
    expect(await text('.error-message')).toBe(wrong.body.error.message);
    await input.fill(RW);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-testid=error][data-status="403"]').waitFor();
    const forbidden = await api('GET', '/v1/admin/keys', undefined, RW);
    expect([forbidden.status, await text('.error-message')]).toEqual([403, forbidden.body.error.message]);
    await shot('sign-in');
    await input.fill(ADMIN);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Pages' }).waitFor();
    // Nothing of the key in the URL, in localStorage or in a cookie; sessionStorage holds it for this tab.
    expect(page.url()).not.toContain(ADMIN);
    expect(await page.evaluate('JSON.stringify(localStorage)')).toBe('{}');
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await page.evaluate('Object.values(sessionStorage)')).toEqual([ADMIN]);
    // A reload stays signed in (same tab).
    await page.reload();
    await page.getByRole('navigation', { name: 'Pages' }).waitFor();
    clean([
      { status: 401, path: '/v1/admin/keys' },
      { status: 403, path: '/v1/admin/keys' },
    ]);
  });

  let experimentId: string;

  it('creates an experiment through the confirmation dialog, shows it active with its arms, rolls it back and shows the timeline', async () => {
    await go('Experiments');
    await page.locator('[data-testid=experiment-form] select[name=baseline] option').first().waitFor({ state: 'attached' });
    await page.selectOption('select[name=type]', 'canary');
    await page.selectOption('select[name=baseline]', 'primary/fast');
    await page.selectOption('select[name=candidate]', 'secondary/smart');
    await page.fill('input[name=traffic_pct]', '50');
    await page.fill('input[name=max_regression]', '0.1');
    await page.fill('input[name=min_n]', '1000');
    await page.getByRole('button', { name: 'Create…' }).click();
    const dialog = page.locator('[data-testid=confirm-create]');
    await dialog.waitFor();
    // Nothing is sent before the operator confirms.
    expect((await api('GET', '/v1/admin/experiments')).body.data).toEqual([]);
    await page.locator('[data-testid=confirm-create-confirm]').click();
    await page.locator('[data-testid=experiment-detail] [data-testid=experiment-status]').waitFor();
    const listed = (await api('GET', '/v1/admin/experiments')).body.data;
    expect(listed).toEqual([
      expect.objectContaining({
        type: 'canary',
        status: 'active',
        traffic_pct: 50,
        baseline: { provider: 'primary', model: 'fast' },
        candidate: { provider: 'secondary', model: 'smart' },
        stop_rule: { min_n: 1000, max_regression: 0.1 },
        created_by_key_id: 'acme-admin',
      }),
    ]);
    experimentId = listed[0].id;
    expect(await attr('[data-testid=experiment-detail]', 'data-id')).toBe(experimentId);
    expect(await text('[data-testid=experiment-status]')).toBe('active');
    await page.locator('[data-testid=experiments-table] tr[data-key] td[data-column=status]', { hasText: 'active' }).waitFor();

    // Traffic in the experiment: 8 sessions on `auto` (baseline primary/fast), each answered, each with feedback.
    for (let i = 1; i <= 8; i++) {
      expect((await chat(`exp-${i}`, `exp-s-${i}`)).status).toBe(200);
      expect((await api('POST', '/v1/feedback', { session_id: `exp-s-${i}`, score: 8, useful: true })).status).toBe(200);
    }
    await flush();
    // Traces are written off the request path: wait until the stop rules' figures hold all 8 sessions.
    const armSamples = async () => {
      const a = (await api('GET', `/v1/admin/experiments/${experimentId}`)).body.arms;
      return a.baseline.samples + a.candidate.samples;
    };
    for (let i = 0; i < 150 && (await armSamples()) < 8; i++) await new Promise((r) => setTimeout(r, 100));
    await page.getByRole('button', { name: 'Close' }).click();
    await page.locator('[data-testid=open-experiment]').first().click();
    await page.locator('[data-testid=arms]').waitFor();
    const detail = (await api('GET', `/v1/admin/experiments/${experimentId}`)).body;
    const armValue = async (row: string, arm: string) => Number(await attr(`[data-testid=arms] tr[data-row=${row}] td[data-arm=${arm}]`, 'data-value'));
    const samples = { baseline: await armValue('samples', 'baseline'), candidate: await armValue('samples', 'candidate') };
    // The page shows the API's figures, and they add up to what was sent: 8 answered sessions with feedback.
    expect(samples).toEqual({ baseline: detail.arms.baseline.samples, candidate: detail.arms.candidate.samples });
    expect(samples.baseline + samples.candidate).toBe(8);
    for (const arm of ['baseline', 'candidate'] as const) {
      expect(await armValue('requests', arm)).toBe(detail.arms[arm].requests);
      expect(await armValue('samples_to_min_n', arm)).toBe(1000 - samples[arm]);
      expect(await attr(`[data-testid=progress-${arm}]`, 'data-value')).toBe(String(samples[arm]));
      expect(await attr(`[data-testid=progress-${arm}]`, 'data-max')).toBe('1000');
      if (samples[arm] > 0) expect(await armValue('mean_score', arm)).toBeCloseTo(8, 9);
    }
    expect(await attr('[data-testid=quality-gap]', 'data-max')).toBe('0.1');
    expect(await text('[data-testid=verdict]')).toBe(detail.stop_rule.verdict);
    await shot('experiments');

    // Escape cancels the roll-back: nothing changes.
    await page.locator('[data-testid=rollback]').click();
    await page.locator('[data-testid=confirm-rollback]').waitFor();
    await page.keyboard.press('Escape');
    expect((await api('GET', `/v1/admin/experiments/${experimentId}`)).body.experiment.status).toBe('active');
    await page.locator('[data-testid=rollback]').click();
    await page.locator('[data-testid=confirm-rollback-confirm]').click();
    await page.locator('[data-testid=experiment-status]', { hasText: 'rolled back' }).waitFor();
    const after = (await api('GET', `/v1/admin/experiments/${experimentId}`)).body;
    expect(after.experiment.status).toBe('rolled_back');
    const kinds = await page.locator('[data-testid=timeline] li').evaluateAll((els) => els.map((e) => `${e.getAttribute('data-kind')}:${e.getAttribute('data-actor')}`));
    expect(kinds).toEqual(after.events.map((e: { kind: string; actor: string }) => `${e.kind}:${e.actor}`));
    expect(kinds).toEqual(['created:api_key', 'started:api_key', 'rolled_back:api_key']);
    expect(await text('[data-testid=timeline] li[data-kind=rolled_back]')).toContain('key acme-admin');
    // Times in the browser's zone, UTC on hover.
    const time = page.locator('[data-testid=timeline] li[data-kind=rolled_back] time');
    const iso = (await time.getAttribute('datetime'))!;
    expect(iso).toBe(after.events[2].created_at);
    expect(await time.getAttribute('title')).toBe(`${iso.replace('T', ' ').replace(/\.\d+Z$/, '')} UTC`);
    const local = new Intl.DateTimeFormat('en-US', { timeZone: TZ, year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' }).format(new Date(iso));
    expect((await time.textContent())?.trim()).toBe(local);
    await shot('experiment-timeline');
    clean();
  });

  it('draws the overview from the usage API: totals, stacked traffic share per model, fallbacks marked', async () => {
    await go('Overview');
    await page.locator('[data-testid=totals]').waitFor();
    const to = new Date();
    const q = new URLSearchParams({ from: new Date(to.getTime() - 86_400_000).toISOString(), to: to.toISOString(), step: 'hour', limit: '1000' });
    const totals = (await api('GET', `/v1/admin/usage?${q}`)).body.data as Array<{ requests: number; errors: number; cost_usd: number; fallbacks: number }>;
    const sum = (k: 'requests' | 'errors' | 'cost_usd' | 'fallbacks') => totals.reduce((n, p) => n + p[k], 0);
    const figure = async (name: string) => Number(await attr(`[data-testid=totals] [data-figure=${name}]`, 'data-value'));
    // What the page shows = what the API answers = what was sent.
    expect(await figure('requests')).toBe(sum('requests'));
    expect(sum('requests')).toBe(seeded.requests);
    expect(await figure('errors')).toBe(sum('errors'));
    expect(sum('errors')).toBe(seeded.errors);
    expect(await figure('fallbacks')).toBe(sum('fallbacks'));
    expect(sum('fallbacks')).toBeGreaterThanOrEqual(seeded.fallbacks);
    expect(await figure('cost')).toBeCloseTo(sum('cost_usd'), 12);
    expect(sum('cost_usd')).toBeGreaterThan(0);
    expect(await text('[data-testid=totals] [data-figure=requests] .tile-value')).toBe(String(seeded.requests));

    const grouped = (await api('GET', `/v1/admin/usage?${q}&group_by=model`)).body.data as Array<{ group: { model: string | null }; requests: number }>;
    const perModel = new Map<string, number>();
    for (const p of grouped) perModel.set(p.group.model ?? '(none selected)', (perModel.get(p.group.model ?? '(none selected)') ?? 0) + p.requests);
    const rows = await page.locator('[data-testid=by-model] tbody tr').evaluateAll((els) =>
      els.map((e) => [e.getAttribute('data-key'), e.querySelector('td[data-column=requests]')?.textContent?.trim()]),
    );
    expect(new Map(rows.map(([k, v]) => [k, Number(v)]))).toEqual(perModel);
    // Seeded: 6 + the experiment's baseline sessions on fast; 3 rescued + the candidate's on smart.
    expect(perModel.get('fast')! + perModel.get('smart')!).toBe(seeded.requests - seeded.errors);
    expect(perModel.get('smart')).toBeGreaterThanOrEqual(3);

    const share = page.locator('[data-testid=chart-share]');
    expect((await share.getAttribute('data-series'))!.split(',').sort()).toEqual([...perModel.keys()].sort());
    // Marked: the bucket with the fallbacks, and the flaky provider's breaker opening (from the providers resource).
    const providers = (await api('GET', '/v1/admin/providers')).body.data as Array<{ id: string; transitions: Array<{ to: string; at: string }> }>;
    const openings = providers.flatMap((p) => p.transitions.filter((x) => x.to === 'open').map((x) => `${p.id}@${x.at}`));
    expect(openings).toEqual([expect.stringMatching(/^flaky@/)]);
    expect(Number(await share.getAttribute('data-markers'))).toBe(totals.filter((p) => p.fallbacks > 0).length + openings.length);
    expect(await share.locator('.markers li', { hasText: 'flaky breaker opened' }).count()).toBe(1);
    expect(await share.locator('canvas').count()).toBe(1);
    expect(Number(await page.locator('[data-testid=chart-requests]').getAttribute('data-points'))).toBeGreaterThanOrEqual(24);
    await shot('overview');
    clean();
  });

  it('shows what routing knows per model, the shared pool beside it', async () => {
    await go('Models');
    await page.locator('[data-testid=models-table]').waitFor();
    const models = (await api('GET', '/v1/admin/models?limit=1000')).body.data as Array<{ provider: string; model: string; stats: { n: number } | null; routes: unknown[] }>;
    const keys = await page.locator('[data-testid=models-table] tbody tr').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    expect(keys.sort()).toEqual(models.map((m) => `${m.provider}/${m.model}`).sort());
    for (const m of models) {
      const cell = await text(`[data-testid=models-table] tr[data-key="${m.provider}/${m.model}"] td[data-column=n]`);
      expect(cell).toBe(m.stats ? m.stats.n.toLocaleString('en-US') : '—');
    }
    // Sorting works from the keyboard.
    await page.locator('[data-testid=models-table] button.sort[data-column=pair]').focus();
    await page.keyboard.press('Enter');
    expect(await attr('[data-testid=models-table] th[aria-sort]', 'aria-sort')).toBe('ascending');
    await page.keyboard.press('Enter');
    expect(await attr('[data-testid=models-table] th[aria-sort]', 'aria-sort')).toBe('descending');
    await page.locator('[data-testid=models-table] tr[data-key="primary/fast"] [data-testid=open-model]').click();
    await page.locator('[data-testid=model-detail]').waitFor();
    expect(await text('[data-testid=model-detail] h2')).toBe('primary/fast');
    expect(await page.locator('[data-testid=model-detail] tbody tr[data-key=main]').count()).toBe(1);
    await shot('models');
    clean();
  });

  it('runs explain and draws the candidates, confidence and explanation as the API states them', async () => {
    await go('Explain');
    await page.getByRole('button', { name: 'Explain' }).click();
    await page.locator('[data-testid=explain-result]').waitFor();
    const body = { request: { model: 'auto', messages: [{ role: 'user', content: 'Hello' }] } };
    const answer = (await api('POST', '/v1/routing/explain', body)).body;
    const bars = await page.locator('[data-testid=explain-candidates] li').evaluateAll((els) => els.map((e) => [e.getAttribute('data-key'), Number(e.getAttribute('data-value'))]));
    expect(bars).toEqual(answer.candidates.map((c: { provider: string; model: string; score: number }) => [`${c.provider}/${c.model}`, c.score]));
    // The route's order: ordered strategy, first target first.
    expect(bars.map((b) => b[0])).toEqual(['primary/fast', 'secondary/smart']);
    expect(await text('[data-testid=would-select]')).toBe('primary/fast');
    expect(await text('[data-testid=strategy]')).toBe('ordered');
    expect(await text('[data-testid=explanation]')).toContain(answer.explanation.text);
    expect(await attr('[data-testid=explanation]', 'data-template')).toBe(answer.explanation.template_id);

    await page.selectOption('select[name=lang]', 'pt');
    await page.getByRole('button', { name: 'Explain' }).click();
    await page.locator('[data-testid=explanation][lang=pt]').waitFor();
    const pt = (await api('POST', '/v1/routing/explain', body, ADMIN, { 'accept-language': 'pt' })).body;
    expect(pt.explanation.text).not.toBe(answer.explanation.text);
    expect(await text('[data-testid=explanation]')).toContain(pt.explanation.text);
    await shot('explain');

    // A body the API refuses: its message, as it words it.
    await page.fill('textarea[name=request]', '{"model": "auto"}');
    await page.getByRole('button', { name: 'Explain' }).click();
    await page.locator('[data-testid=error][data-status="400"]').waitFor();
    const refused = (await api('POST', '/v1/routing/explain', { request: { model: 'auto' } })).body;
    expect(await text('.error-message')).toBe(refused.error.message);
    clean([{ status: 400, path: '/v1/routing/explain' }]);
  });

  it('finds a trace by request id and draws its routing decision and attempts', async () => {
    await go('Traces');
    await page.fill('[data-testid=trace-filters] input[name=request_id]', 'seed-fb-2');
    await page.getByRole('button', { name: 'Search' }).click();
    // The page lists the newest traces before the search answers: wait for the search's answer (one
    // row, the request id's), not for the first row of the list it replaces.
    await page.locator('[data-testid=traces-table] tbody tr', { hasText: 'seed-fb-2' }).first().waitFor();
    await page.locator('[data-testid=traces-table] tbody tr').nth(1).waitFor({ state: 'detached' });
    const found = (await api('GET', '/v1/admin/traces?request_id=seed-fb-2')).body.data;
    expect(found).toHaveLength(1);
    expect(await page.locator('[data-testid=traces-table] tbody tr').count()).toBe(1);
    await page.locator('[data-testid=open-trace]').click();
    await page.locator('[data-testid=trace-facts]').waitFor();
    const trace = (await api('GET', `/v1/admin/traces/${encodeURIComponent(found[0].id)}`)).body;
    expect(await text('[data-testid=trace-request-id]')).toBe('seed-fb-2');
    // Seeded: the first target answered 500, the fallback served.
    expect([trace.attempts, trace.selected, trace.fallback_used]).toEqual([2, { provider: 'secondary', model: 'smart' }, true]);
    expect(await attr('[data-testid=trace-attempts]', 'data-value')).toBe('2');
    expect(await text('[data-testid=trace-selected]')).toBe('secondary/smart');
    expect(Number(await attr('[data-testid=trace-latency]', 'data-value'))).toBe(trace.latency_ms);
    expect(Number(await attr('[data-testid=trace-cost]', 'data-value'))).toBe(trace.cost_usd);
    const failed = await page.locator('[data-testid=trace-failed] tbody tr').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    expect(failed).toEqual(trace.failed_attempts.map((a: { provider: string; model: string; error: string }) => `${a.provider}/${a.model}:${a.error}`));
    expect(failed[0]).toMatch(/^primary\/fast:/);
    const candidates = await page.locator('[data-testid=trace-candidates] li').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    expect(candidates).toEqual(trace.candidates.map((c: { provider: string; model: string }) => `${c.provider}/${c.model}`));
    await shot('traces');
    clean();
  });

  it('creates a key (shown once, copyable) and revokes it through the dialog', async () => {
    await go('Keys');
    await page.locator('[data-testid=keys-table]').waitFor();
    await page.locator('[data-testid=key-form] input[name=write]').uncheck();
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.locator('[data-testid=new-key]').waitFor();
    const id = (await attr('[data-testid=new-key]', 'data-id'))!;
    const secret = await page.locator('[data-testid=new-key-secret]').inputValue();
    // The key works as created: read only, no admin.
    expect((await api('GET', '/v1/models', undefined, secret)).status).toBe(200);
    expect((await api('GET', '/v1/admin/keys', undefined, secret)).status).toBe(403);
    const listed = (await api('GET', `/v1/admin/keys/${id}`)).body;
    expect([listed.permissions, listed.revoked]).toEqual([['read'], false]);
    await page.locator('[data-testid=copy-key]').click();
    await page.getByText('Copied.').waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(secret);
    await page.locator(`[data-testid=keys-table] tr[data-key="${id}"]`).waitFor();
    expect(await text(`[data-testid=keys-table] tr[data-key="${id}"] td[data-column=permissions]`)).toBe('read');
    await shot('keys');
    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.locator('[data-testid=new-key-secret]').count()).toBe(0);
    expect(await page.content()).not.toContain(secret);

    // The key's limits, edited through their dialog (a merge patch: an empty field removes a control).
    await page.locator(`[data-testid=keys-table] tr[data-key="${id}"] [data-testid=key-limits]`).click();
    const limits = page.locator('[data-testid=key-limits-dialog]');
    await limits.locator('input[name=requests_per_minute]').fill('5');
    await limits.locator('input[name=monthly_budget_usd]').fill('2.5');
    await page.locator('[data-testid=key-limits-dialog-confirm]').click();
    await page.locator(`[data-testid=keys-table] tr[data-key="${id}"] td[data-column=limits]`, { hasText: '5 req/min' }).waitFor();
    expect((await api('GET', `/v1/admin/keys/${id}`)).body.limits).toEqual({ requests_per_minute: 5, monthly_budget_usd: 2.5 });
    expect(await text(`[data-testid=keys-table] tr[data-key="${id}"] td[data-column=limits]`)).toBe('5 req/min · $2.500/month');
    // A value the API refuses: its message in the dialog, nothing changed.
    await page.locator(`[data-testid=keys-table] tr[data-key="${id}"] [data-testid=key-limits]`).click();
    await page.locator('[data-testid=key-limits-dialog] input[name=tokens_per_minute]').fill('-1');
    await page.locator('[data-testid=key-limits-dialog-confirm]').click();
    await page.locator('[data-testid=key-limits-dialog] [data-testid=error][data-status="400"]').waitFor();
    const refused = await api('PATCH', `/v1/admin/keys/${id}`, { limits: { tokens_per_minute: -1 } });
    expect(await text('[data-testid=key-limits-dialog] .error-message')).toBe(refused.body.error.message);
    await page.keyboard.press('Escape');
    expect((await api('GET', `/v1/admin/keys/${id}`)).body.limits).toEqual({ requests_per_minute: 5, monthly_budget_usd: 2.5 });
    // The organisation's controls and this month's spend, as the API states them (from gateway.yaml: not editable here).
    const org = (await api('GET', '/v1/admin/limits')).body;
    expect(Number(await attr('[data-testid=org-spend]', 'data-value'))).toBe(org.usage.spend_usd);
    expect(await page.locator('[data-testid=org-limits-edit]').count()).toBe(org.config_managed ? 0 : 1);
    expect(await text('[data-testid=keys-table] tr[data-key=acme-admin] td[data-column=spend]')).toBe(
      org.usage.keys['acme-admin'] === undefined ? '$0' : `$${Number(org.usage.keys['acme-admin']).toFixed(6)}`,
    );

    await page.locator(`[data-testid=keys-table] tr[data-key="${id}"] [data-testid=key-revoke]`).click();
    await page.locator('[data-testid=confirm-revoke]').waitFor();
    await page.locator('[data-testid=confirm-revoke-confirm]').click();
    await page.locator(`[data-testid=keys-table] tr[data-key="${id}"] td[data-column=state]`, { hasText: 'revoked' }).waitFor();
    expect((await api('GET', '/v1/models', undefined, secret)).status).toBe(401);
    expect((await api('GET', `/v1/admin/keys/${id}`)).body.revoked).toBe(true);
    // Keys from gateway.yaml cannot be revoked here.
    expect(await page.locator('[data-testid=keys-table] tr[data-key=acme-admin] [data-testid=key-revoke]').isDisabled()).toBe(true);
    clean([{ status: 400, path: `/v1/admin/keys/${id}` }]);
  });

  it('shows each provider\'s breaker and its transitions, the opening with the failure that caused it', async () => {
    await go('Providers');
    await page.locator('[data-testid=providers-table]').waitFor();
    const providers = (await api('GET', '/v1/admin/providers')).body.data as Array<{
      id: string;
      breaker: { state: string };
      transitions: Array<{ to: string; from: string | null; cause: { error: string; status: number | null } | null }>;
      traffic: { requests: number; errors: number };
    }>;
    const rows = await page.locator('[data-testid=providers-table] tbody tr').evaluateAll((els) =>
      els.map((e) => ({
        id: e.getAttribute('data-key'),
        state: e.querySelector('td[data-column=state]')?.textContent?.trim(),
        requests: Number(e.querySelector('td[data-column=requests]')?.textContent?.trim()),
        errors: Number(e.querySelector('td[data-column=errors]')?.textContent?.trim()),
      })),
    );
    expect(rows).toEqual(providers.map((p) => ({ id: p.id, state: p.breaker.state.replace('_', '-'), requests: p.traffic.requests, errors: p.traffic.errors })));
    // Seeded: the flaky provider was called 5 times and failed 5 times, which opened its breaker.
    const shown = new Map(rows.map((r) => [r.id, r]));
    expect([shown.get('flaky')!.requests, shown.get('flaky')!.errors]).toEqual([5, 5]);
    expect(shown.get('primary')!.errors).toBe(5);
    const opening = providers.find((p) => p.id === 'flaky')!.transitions.find((x) => x.to === 'open')!;
    expect(opening.cause).toEqual({ error: expect.any(String), status: 500 });
    await page.locator('[data-testid=providers-table] tr[data-key=flaky] [data-testid=open-provider]').click();
    const changes = await page.locator('[data-testid=transitions-table] tbody tr').evaluateAll((els) =>
      els.map((e) => [e.querySelector('td[data-column=provider]')?.textContent?.trim(), e.querySelector('td[data-column=cause]')?.textContent?.trim()]),
    );
    expect(changes.length).toBe(providers.find((p) => p.id === 'flaky')!.transitions.length);
    expect(changes).toContainEqual(['flaky', `${opening.cause!.error} 500`]);
    await shot('providers');
    clean();
  });

  it('is readable on a 390-px-wide phone: no page wider than the screen', async () => {
    const phone = await watchedPage(browser, { viewport: { width: 390, height: 844 }, timezoneId: TZ });
    try {
      await phone.page.goto(`${t.url}/console/#/overview`);
      await phone.page.getByLabel('API key').fill(ADMIN);
      await phone.page.keyboard.press('Enter');
      for (const p of ['overview', 'experiments', 'explain', 'keys', 'models', 'traces']) {
        await phone.page.goto(`${t.url}/console/#/${p}`);
        await phone.page.locator(`main[data-page=${p}]`).waitFor();
        await phone.page.locator('.state.loading').first().waitFor({ state: 'detached' });
        expect([p, await phone.page.evaluate('document.documentElement.scrollWidth')]).toEqual([p, 390]);
      }
      await phone.page.goto(`${t.url}/console/#/overview`);
      await phone.page.locator('[data-testid=totals]').waitFor();
      await shot('overview-phone', phone.page);
      expect(unexpected(phone.problems)).toEqual([]);
    } finally {
      await phone.context.close();
    }
  });
});
