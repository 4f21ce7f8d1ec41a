/**
 * A real browser for the console's suite (docs/architecture.md "Console"): Debian's Chromium driven
 * by playwright-core, headless. Each page collects what would be a console error for a person:
 * console messages of type error and uncaught exceptions; a suite asserts there were none except
 * the API error answers it caused on purpose.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

/** Where .ci/run installs it (Debian's `chromium` package); CHROMIUM_PATH overrides. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`No Chromium at ${CHROMIUM_PATH}: install Debian's chromium (apt-get install chromium), as .ci/run does, or set CHROMIUM_PATH`);
  }
  // As root (CI) Chromium refuses its sandbox; /dev/shm is small in containers.
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
}

export interface WatchedPage {
  context: BrowserContext;
  page: Page;
  /** Console errors and uncaught exceptions, in order. */
  problems: string[];
}

export interface PageOptions {
  viewport?: { width: number; height: number };
  /** The browser's zone; not UTC, so local times and their UTC titles differ. */
  timezoneId?: string;
}

export async function watchedPage(browser: Browser, opts: PageOptions = {}): Promise<WatchedPage> {
  const context = await browser.newContext({
    viewport: opts.viewport ?? { width: 1280, height: 800 },
    timezoneId: opts.timezoneId ?? 'Asia/Kolkata',
    locale: 'en-US',
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()} (${m.location().url})`);
  });
  page.on('pageerror', (e) => problems.push(`uncaught: ${e.message}`));
  return { context, page, problems };
}

/**
 * The problems left once the API answers a test caused on purpose are taken out: Chromium reports
 * every 4xx/5xx fetch as "Failed to load resource … status of N", naming the URL.
 */
export function unexpected(problems: readonly string[], expected: ReadonlyArray<{ status: number; path: string }> = []): string[] {
  return problems.filter(
    (p) => !expected.some((e) => p.includes(`status of ${e.status}`) && new RegExp(`\\(https?://[^)]*${e.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`).test(p)),
  );
}
