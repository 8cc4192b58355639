import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install -y chromium`); browser tests skip, under a name saying so, without it. */
export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

/** Headless Chromium without the background traffic this offline machine would refuse. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-background-networking',
      '--disable-gpu',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/**
 * A fresh page that collects script errors. A refused (403) click or form (422) is logged by the browser
 * as a failed resource: those are expected; anything else is a real error.
 */
export async function openPage(browser: Browser): Promise<{ page: Page; pageErrors: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/status of (403|422)/.test(message.text()))
      pageErrors.push(message.text());
  });
  return { page, pageErrors };
}
