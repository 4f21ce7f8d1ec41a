import OpenAI from 'openai';
import { OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';

/** Circuit breaker opening and closing, and the per-key rate limit, through the official SDK. */
let t: TestApp;
let client: OpenAI;
const flaky = new OpenAiFake({ variant: 'openai' });

beforeAll(async () => {
  await flaky.start();
  t = await startTestApp({
    yaml: `
providers:
  flaky: { family: openai, base_url: "${flaky.url}", api_key: "sk-x" }
  mock: { family: mock }
models:
  f: { provider: flaky, upstream: flaky-model }
  m: { provider: mock, upstream: mock-m }
limits: { requests_per_minute_per_key: 40 }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" }, { id: acme-2, key: "gw-second-key" } ]
`,
  });
  client = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await t.close();
  await flaky.stop();
});

const ask = (c: OpenAI, model: string) => c.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
const providerState = async (id: string) => {
  const body = (await (await fetch(`${t.url}/health/providers`)).json()) as { providers: Array<{ id: string; state: string }> };
  return body.providers.find((p) => p.id === id)?.state;
};

it('opens after 5 consecutive failures (503 providers_unavailable, upstream not called), then closes after a successful probe', async () => {
  flaky.always({ errorStatus: 503 });
  for (let i = 0; i < 5; i++) {
    const err = await ask(client, 'f').catch((e) => e);
    expect([err.status, err.error?.code]).toEqual([502, 'upstream_error']);
  }
  expect(flaky.requests).toHaveLength(5);
  expect(await providerState('flaky')).toBe('open');
  const open = await ask(client, 'f').catch((e) => e);
  expect([open.status, open.error?.code]).toEqual([503, 'providers_unavailable']);
  expect(open.headers.get('retry-after')).toBeTruthy();
  expect(flaky.requests).toHaveLength(5);
  // A comma list skips the open provider and says so.
  const { response } = await client.chat.completions.create({ model: 'f,m', messages: [{ role: 'user', content: 'x' }] }).withResponse();
  expect(response.headers.get('gateway-fallback-used')).toBe('true');
  expect(flaky.requests).toHaveLength(5);

  // First open period: 5 s ± 20 %. After it one probe goes through; its success closes the breaker.
  flaky.always({ text: 'healthy again' });
  await new Promise((r) => setTimeout(r, 6_200));
  const ok = await ask(client, 'f');
  expect(ok.choices[0].message.content).toBe('healthy again');
  expect(await providerState('flaky')).toBe('closed');
  expect((await ask(client, 'f')).choices[0].message.content).toBe('healthy again');
}, 20_000);

it('per-key rate limit: 429 rate_limited with Retry-After, other keys unaffected', async () => {
  const second = new OpenAI({ apiKey: 'gw-second-key', baseURL: `${t.url}/v1`, maxRetries: 0 });
  let denied: any;
  for (let i = 0; i < 41 && !denied; i++) denied = await ask(second, 'm').then(() => undefined, (e) => e);
  expect([denied.status, denied.error?.code]).toEqual([429, 'rate_limited']);
  expect(Number(denied.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect((await ask(client, 'm')).model).toBe('m');
});
