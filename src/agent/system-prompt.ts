import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Prompts live in `prompts/` at the package root. This file sits at `src/agent/` (from source) or
 * `dist/src/agent/` (built), so both depths are tried.
 */
function promptPath(name: string): string {
  for (const depth of ['../../', '../../../']) {
    const path = fileURLToPath(new URL(`${depth}prompts/${name}.md`, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new Error(`prompts/${name}.md not found next to ${fileURLToPath(import.meta.url)}`);
}

/** Read a prompt (`system`, `research`) once at start-up and fill in the bot's name. */
export function loadPrompt(name: 'system' | 'research', botName: string): string {
  return readFileSync(promptPath(name), 'utf8').replaceAll('{{botName}}', botName).trim();
}

/** The main agent's prompt. */
export function loadSystemPrompt(botName: string): string {
  return loadPrompt('system', botName);
}
