import { existsSync } from 'node:fs';
import { readdir, readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ToolPolicyError } from '../errors.js';
import { defineTool } from './registry.js';

/**
 * Team playbooks: markdown files in `SHEPHERD_PLAYBOOKS_DIR` (default: the `prompts/playbooks/` shipped
 * with Shepherd), each with a `# Title` and a `Use when: …` line. `help` lists them and the agent loads
 * one with `read_playbook`. Local files only, never fetched; names are validated and must resolve inside
 * the directory.
 */

interface PlaybookEntry {
  name: string;
  title: string;
  useWhen: string;
}

const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const MAX_PLAYBOOK_CHARS = 15_000;

/** The shipped directory: `prompts/playbooks` at the package root, from source or built. */
export function defaultPlaybooksDir(): string {
  for (const candidate of ['../../prompts/playbooks', '../../../prompts/playbooks']) {
    const directory = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(directory)) return directory;
  }
  return fileURLToPath(new URL('../../prompts/playbooks', import.meta.url));
}

function parsePlaybook(name: string, text: string): PlaybookEntry {
  const lines = text.split('\n');
  const title =
    lines
      .find((line) => /^#\s+\S/.test(line))
      ?.replace(/^#\s+/, '')
      .trim() ?? name;
  const useLine = lines.find((line) => /^\s*(\*\*)?use when:?(\*\*)?:?/i.test(line));
  const useWhen =
    useLine
      ?.replace(/^\s*(\*\*)?use when:?(\*\*)?:?\s*/i, '')
      .replace(/\*\*/g, '')
      .trim() ?? '';
  return { name, title, useWhen };
}

export interface Playbooks {
  list(): Promise<PlaybookEntry[]>;
  read(name: string): Promise<string>;
  /** The `help` section: one line per playbook. */
  describe(): Promise<string>;
}

export function createPlaybooks(options: { directory: string | undefined }): Playbooks {
  const directory = path.resolve(options.directory ?? defaultPlaybooksDir());

  async function list(): Promise<PlaybookEntry[]> {
    let files: string[];
    try {
      files = await readdir(directory);
    } catch {
      return [];
    }
    const entries: PlaybookEntry[] = [];
    for (const file of files.sort()) {
      if (!file.endsWith('.md')) continue;
      const name = file.slice(0, -3);
      if (!NAME.test(name)) continue;
      const text = await readFile(path.join(directory, file), 'utf8').catch(() => undefined);
      if (text !== undefined) entries.push(parsePlaybook(name, text));
    }
    return entries;
  }

  async function read(name: string): Promise<string> {
    const clean = name.trim().replace(/\.md$/, '').toLowerCase();
    const known = await list();
    if (!NAME.test(clean) || !known.some((entry) => entry.name === clean)) {
      throw new ToolPolicyError(
        'playbook_unknown',
        `no playbook named "${name}". Available: ${known.map((entry) => entry.name).join(', ') || '(none)'}.`,
      );
    }
    const file = path.join(directory, `${clean}.md`);
    // A symlink pointing outside the playbooks directory is refused.
    const real = await realpath(file);
    const root = await realpath(directory);
    if (!real.startsWith(`${root}${path.sep}`)) {
      throw new ToolPolicyError(
        'playbook_outside',
        `playbook "${clean}" points outside the playbooks directory`,
      );
    }
    const text = await readFile(real, 'utf8');
    return text.length > MAX_PLAYBOOK_CHARS ? `${text.slice(0, MAX_PLAYBOOK_CHARS)}\n… (cut)` : text;
  }

  return {
    list,
    read,
    async describe() {
      const entries = await list();
      if (entries.length === 0) return 'Playbooks: none installed.';
      return [
        'Playbooks (the agent loads one with read_playbook when it fits):',
        ...entries.map(
          (entry) =>
            `- \`${entry.name}\`: ${entry.title}${entry.useWhen === '' ? '' : ` — use when ${entry.useWhen}`}`,
        ),
      ].join('\n');
    },
  };
}

export function createReadPlaybookTool(playbooks: Playbooks) {
  return defineTool({
    name: 'read_playbook',
    description:
      "Load one of the team's playbooks (how we do SFT, LoRA/QLoRA, DPO, evaluation, multi-GPU, fitting in memory) with a minimal script. Call it before writing a training script for one of those tasks. `help` with topic playbooks lists them.",
    input: z.object({
      name: z.string().min(1).max(64).describe('Playbook name as listed by help, e.g. sft-trl'),
    }),
    execute: (input) => playbooks.read(input.name),
  });
}
