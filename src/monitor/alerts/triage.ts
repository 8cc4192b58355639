import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { RUN_FILES } from '../../runs/records/run-files.js';
import { renderTriageSnapshot, type TriageSnapshot } from '../triage-snapshot.js';

/**
 * LLM triage: one question per incident (or per person asking), answered with a strict structure. An
 * answer that does not parse is retried once with a corrective instruction, then reported as a warning.
 * A stray ```python block is never taken as a fix: only the `script` field of a valid FIX answer counts.
 */

const triageAnswerSchema = z
  .object({
    decision: z.enum(['LGTM', 'WARNING', 'FIX']),
    diagnosis: z.string().trim().min(1).max(4000),
    script: z.string().optional(),
  })
  .strict();

type TriageAnswer = z.infer<typeof triageAnswerSchema>;

export type TriageResult =
  | { decision: 'LGTM' | 'WARNING'; diagnosis: string; parsed: boolean; attempts: number }
  | { decision: 'FIX'; diagnosis: string; script: string; parsed: true; attempts: number };

type ParseOutcome = { ok: true; answer: TriageAnswer } | { ok: false; reason: string };

/**
 * Accept exactly: the JSON object alone, or the JSON object inside one ```json fence — after dropping a
 * leading `<think>…</think>` block that reasoning models emit. Anything else is rejected.
 */
export function parseTriageAnswer(text: string): ParseOutcome {
  let body = text.trim().replace(/^<think>[\s\S]*?<\/think>\s*/, '');
  const fence = /^```json[ \t]*\n([\s\S]*?)\n?```$/.exec(body);
  if (fence !== null) body = (fence[1] ?? '').trim();
  if (!body.startsWith('{') || !body.endsWith('}')) {
    return {
      ok: false,
      reason: 'the answer must be one JSON object (optionally inside a single ```json fence)',
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    return { ok: false, reason: `invalid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  const result = triageAnswerSchema.safeParse(value);
  if (!result.success) return { ok: false, reason: z.prettifyError(result.error) };
  return { ok: true, answer: result.data };
}

const DEFAULT_PROMPT_PATH = new URL('../../../prompts/triage.md', import.meta.url);

/** The triage prompt template (`prompts/triage.md`), with `{{snapshot}}` where the snapshot goes. */
async function loadTriagePrompt(path: string | URL = DEFAULT_PROMPT_PATH): Promise<string> {
  return readFile(path, 'utf8');
}

function buildTriagePrompt(template: string, snapshot: TriageSnapshot): string {
  const rendered = renderTriageSnapshot(snapshot);
  return template.includes('{{snapshot}}')
    ? template.replace('{{snapshot}}', () => rendered)
    : `${template}\n\n${rendered}`;
}

const CORRECTION = (reason: string) =>
  `Your previous answer could not be used (${reason}). Reply again with ONLY one JSON object of the form ` +
  '{"decision": "LGTM" | "WARNING" | "FIX", "diagnosis": "...", "script": "... (only for FIX: the complete new train.py)"} ' +
  'and nothing else — no prose, no other code blocks.';

/**
 * Ask the LLM (through the injected `ask`) to triage a snapshot. At most two calls. FIX without a script
 * becomes a WARNING; the caller still syntax-checks the script and sends it through approval.
 */
export async function triage(options: {
  ask: (prompt: string) => Promise<string>;
  snapshot: TriageSnapshot;
  /** Prompt template; defaults to prompts/triage.md. */
  template?: string;
}): Promise<TriageResult> {
  const template = options.template ?? (await loadTriagePrompt());
  const prompt = buildTriagePrompt(template, options.snapshot);
  let lastReason = '';
  for (let attempt = 1; attempt <= 2; attempt++) {
    const text = await options.ask(attempt === 1 ? prompt : `${prompt}\n\n${CORRECTION(lastReason)}`);
    const outcome = parseTriageAnswer(text);
    if (!outcome.ok) {
      lastReason = outcome.reason;
      continue;
    }
    const { answer } = outcome;
    if (answer.decision === 'FIX') {
      const script = answer.script?.trim() ?? '';
      if (script === '') {
        return {
          decision: 'WARNING',
          diagnosis: `${answer.diagnosis} (a fix was suggested but no script was provided)`,
          parsed: true,
          attempts: attempt,
        };
      }
      return {
        decision: 'FIX',
        diagnosis: answer.diagnosis,
        script: answer.script ?? '',
        parsed: true,
        attempts: attempt,
      };
    }
    return { decision: answer.decision, diagnosis: answer.diagnosis, parsed: true, attempts: attempt };
  }
  return {
    decision: 'WARNING',
    diagnosis: `triage answer could not be parsed after a retry (${lastReason.slice(0, 200)}); a person should look at this run.`,
    parsed: false,
    attempts: 2,
  };
}

type SyntaxCheck = { ok: true } | { ok: false; error: string };

/** `python -m py_compile` on a temp copy of the script; the error text is what Python printed. */
export async function checkPythonSyntax(
  source: string,
  python = 'python3',
  /** The environment to run Python in (the runs' environment; nothing here reads `process.env`). */
  environment: Readonly<Record<string, string | undefined>> = { PATH: '/usr/local/bin:/usr/bin:/bin' },
): Promise<SyntaxCheck> {
  const directory = await mkdtemp(join(tmpdir(), 'shepherd-syntax-'));
  const file = join(directory, RUN_FILES.script);
  try {
    await writeFile(file, source, 'utf8');
    return await new Promise<SyntaxCheck>((resolve) => {
      execFile(
        python,
        ['-m', 'py_compile', file],
        { timeout: 30_000, env: { ...environment, PYTHONDONTWRITEBYTECODE: '1' } },
        (error, _stdout, stderr) => {
          if (error === null) resolve({ ok: true });
          else
            resolve({
              ok: false,
              error: (stderr || error.message).replaceAll(file, RUN_FILES.script).trim().slice(-2000),
            });
        },
      );
    });
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}
