import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The system prompt lives in `prompts/system.md` at the package root. This file sits at
 * `src/agent/` (from source) or `dist/src/agent/` (built), so both depths are tried.
 */
const candidates = ['../../prompts/system.md', '../../../prompts/system.md'];

function systemPromptPath(): string {
  for (const candidate of candidates) {
    const path = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new Error(`prompts/system.md not found next to ${fileURLToPath(import.meta.url)}`);
}

/** Read the prompt once at start-up and fill in the bot's name. */
export function loadSystemPrompt(botName: string): string {
  return readFileSync(systemPromptPath(), 'utf8').replaceAll('{{botName}}', botName).trim();
}
