import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The playground page's script and stylesheet, inlined into the page and allowed by hash in its CSP. */
export interface PageAssets {
  script: string;
  style: string;
}

const PAGE_SCRIPT_FILE = 'page.js';
const PAGE_STYLE_FILE = 'page.css';

const here = fileURLToPath(new URL('.', import.meta.url));
const sourceDir = join(here, 'page');

/**
 * Bundle `page/main.ts` (and markdown-it, DOMPurify, Chart.js it imports) with esbuild: local files only,
 * no network. Takes well under a second, so development runs (tsx) bundle at start-up.
 */
async function bundlePage(): Promise<PageAssets> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: [join(sourceDir, 'main.ts')],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const output = result.outputFiles[0];
  if (output === undefined) throw new Error('esbuild produced no page bundle');
  const style = await readFile(join(sourceDir, 'style.css'), 'utf8');
  return { script: output.text, style };
}

/** Write the bundle next to the compiled page module (`npm run build`), so production needs no esbuild step. */
export async function writePageBundle(outDir: string): Promise<void> {
  const assets = await bundlePage();
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, PAGE_SCRIPT_FILE), assets.script);
  await writeFile(join(outDir, PAGE_STYLE_FILE), assets.style);
}

let cached: Promise<PageAssets> | undefined;

/** The prebuilt bundle when there is one (a `dist/` build), else a fresh bundle of the sources; cached. */
export function loadPageAssets(): Promise<PageAssets> {
  cached ??= (async () => {
    const prebuilt = join(sourceDir, PAGE_SCRIPT_FILE);
    if (existsSync(prebuilt)) {
      return {
        script: await readFile(prebuilt, 'utf8'),
        style: await readFile(join(sourceDir, PAGE_STYLE_FILE), 'utf8'),
      };
    }
    return bundlePage();
  })();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
