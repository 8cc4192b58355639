import { mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { tailLines } from '../file-tail.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import { RUN_FILES } from '../records/run-files.js';

/**
 * What it takes to reproduce a launch, recorded beside it (launch-capture.ts writes it; `status --full` and
 * the model card read it): the command, arguments and config, the seed, the git commit with its diff when
 * the tree is dirty, and the run environment (Python, `pip freeze`, torch, CUDA, driver). One file per
 * launch under `launch-records/`, so a slow probe of launch 1 never overwrites launch 2's record.
 */

const LAUNCH_RECORDS_DIR = 'launch-records';
/** A diff above this is cut (the commit still names the tree); the record says it was cut. */
export const MAX_DIFF_CHARS = 200_000;

const environmentSchema = z.object({
  python: z.string().optional(),
  executable: z.string().optional(),
  pipFreeze: z.array(z.string()).optional(),
  torch: z.string().optional(),
  torchCuda: z.string().optional(),
  cuda: z.string().optional(),
  driver: z.string().optional(),
  gpus: z.array(z.string()).optional(),
  /** Probes that failed or timed out, each with its reason (torch not installed, no nvidia-smi). */
  errors: z.record(z.string(), z.string()).default({}),
});

const hubRevisionSchema = z.object({
  kind: z.enum(['model', 'dataset']),
  repo: z.string(),
  sha: z.string(),
  via: z.string(),
  resolvedAt: z.string(),
});
export type LaunchHubRevision = z.infer<typeof hubRevisionSchema>;

const launchRecordSchema = z.object({
  schemaVersion: z.literal(1),
  runId: z.string(),
  launch: z.number().int().positive(),
  recordedAt: z.string(),
  backend: z.string(),
  /** The argv the launch starts (a command run's, or `python -u train.py` with its arguments). */
  command: z.array(z.string()),
  cwd: z.string().optional(),
  args: z.array(z.string()).optional(),
  config: z.record(z.string(), z.unknown()).optional(),
  scriptVersion: z.number().int().positive(),
  scriptSha256: z.string().optional(),
  seed: z.string().optional(),
  modelId: z.string().optional(),
  environmentName: z.string().optional(),
  git: z
    .object({
      commit: z.string(),
      dirty: z.boolean(),
      diff: z.string().optional(),
      diffTruncated: z.boolean().optional(),
    })
    .optional(),
  /** Filled in once the probe answered; absent while it runs. */
  environment: environmentSchema.optional(),
  /** Why there is no environment (a remote backend, a container, a probe that timed out). */
  environmentNote: z.string().optional(),
  /** Hub revisions the agent's Hub tools resolved in the thread, of the repos this launch names. */
  hubRevisions: z.array(hubRevisionSchema).optional(),
});

export type LaunchRecord = z.infer<typeof launchRecordSchema>;
export const parseLaunchEnvironment = (value: unknown) => environmentSchema.parse(value);

/** A model or dataset revision the script printed (`model_revision=…`, `dataset: org/name@<sha>`). */
interface PrintedRevision {
  kind: 'model' | 'dataset';
  value: string;
}

/** What `status --full` and the model card show: the newest launch's record and the printed revisions. */
interface Reproducibility {
  record?: LaunchRecord;
  /** A record that is there but does not parse. */
  problem?: string;
  revisions: PrintedRevision[];
}

const recordFile = (runDir: string, launch: number) =>
  path.join(runDir, LAUNCH_RECORDS_DIR, `launch-${launch}.json`);

export async function writeLaunchRecord(runDir: string, record: LaunchRecord): Promise<void> {
  await mkdir(path.join(runDir, LAUNCH_RECORDS_DIR), { recursive: true });
  await writeFileAtomic(recordFile(runDir, record.launch), `${JSON.stringify(record, null, 2)}\n`);
}

async function newestLaunch(runDir: string): Promise<number | undefined> {
  const names = await readdir(path.join(runDir, LAUNCH_RECORDS_DIR)).catch(() => [] as string[]);
  const launches = names.flatMap((name) => {
    const match = /^launch-(\d+)\.json$/.exec(name);
    return match === null ? [] : [Number(match[1])];
  });
  return launches.length === 0 ? undefined : Math.max(...launches);
}

const REVISION_PATTERNS: Array<{ pattern: RegExp; read: (match: RegExpExecArray) => PrintedRevision }> = [
  {
    pattern: /\b(model|dataset)[ _-]?revision\s*[=:]\s*["']?([\w./-]{1,100})/gi,
    read: (match) => ({ kind: kindOf(match[1]), value: match[2] ?? '' }),
  },
  {
    pattern: /\b(model|dataset)\s*[=:]\s*["']?([\w.-]+\/[\w.-]+@[0-9a-f]{7,40})\b/gi,
    read: (match) => ({ kind: kindOf(match[1]), value: match[2] ?? '' }),
  },
];
const kindOf = (word: string | undefined): PrintedRevision['kind'] =>
  word?.toLowerCase() === 'dataset' ? 'dataset' : 'model';

/** Revisions printed in the given log lines, each once, in order of appearance. */
function printedRevisions(lines: readonly string[]): PrintedRevision[] {
  const found: PrintedRevision[] = [];
  for (const line of lines) {
    for (const { pattern, read } of REVISION_PATTERNS) {
      for (const match of line.matchAll(pattern)) {
        const revision = read(match as RegExpExecArray);
        if (!found.some((known) => known.kind === revision.kind && known.value === revision.value)) {
          found.push(revision);
        }
      }
    }
  }
  return found;
}

/** The newest launch's record (zod-checked) and the revisions its output printed. For status and the model card. */
export async function readReproducibility(runDir: string): Promise<Reproducibility> {
  const lines = await tailLines(path.join(runDir, RUN_FILES.output), 2000);
  const revisions = printedRevisions(lines);
  const launch = await newestLaunch(runDir);
  if (launch === undefined) return { revisions };
  try {
    const raw: unknown = JSON.parse(await readFile(recordFile(runDir, launch), 'utf8'));
    const parsed = launchRecordSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return { revisions, problem: `launch-${launch}.json: ${issue?.path.join('.')} ${issue?.message}` };
    }
    return { revisions, record: parsed.data };
  } catch (error) {
    return { revisions, problem: `launch-${launch}.json is unreadable: ${(error as Error).message}` };
  }
}

const FREEZE_SHOWN = 40;
/** Listed first in `status --full`: the packages that decide what a training run computes. */
const KEY_PACKAGES = new Set([
  'torch',
  'transformers',
  'datasets',
  'accelerate',
  'trl',
  'peft',
  'deepspeed',
  'tokenizers',
  'safetensors',
  'bitsandbytes',
  'flash-attn',
  'flash_attn',
  'xformers',
  'vllm',
  'numpy',
  'jax',
  'tensorflow',
]);
const packageName = (line: string) => (/^([A-Za-z0-9_.-]+)/.exec(line)?.[1] ?? '').toLowerCase();

/** The key packages first (in freeze order), then the rest. */
function freezeOrder(freeze: readonly string[]): string[] {
  const key = freeze.filter((line) => KEY_PACKAGES.has(packageName(line)));
  return [...key, ...freeze.filter((line) => !KEY_PACKAGES.has(packageName(line)))];
}

function environmentLines(record: LaunchRecord): string[] {
  const environment = record.environment;
  if (environment === undefined) {
    return [`Environment: ${record.environmentNote ?? 'still being probed'}`];
  }
  const versions = [
    environment.python === undefined ? undefined : `Python ${environment.python}`,
    environment.torch === undefined
      ? 'torch not importable'
      : `torch ${environment.torch}${environment.torchCuda === undefined ? '' : ` (CUDA ${environment.torchCuda})`}`,
    environment.cuda === undefined ? undefined : `CUDA ${environment.cuda}`,
    environment.driver === undefined ? undefined : `driver ${environment.driver}`,
    environment.gpus === undefined || environment.gpus.length === 0
      ? 'no nvidia-smi'
      : `GPUs ${environment.gpus.join(', ')}`,
  ].filter((part) => part !== undefined);
  const lines = [
    `Environment: ${versions.join(', ')}${environment.executable ? ` (${environment.executable})` : ''}`,
  ];
  const freeze = environment.pipFreeze;
  if (freeze === undefined) {
    lines.push(`pip freeze: not available (${environment.errors.pipFreeze ?? 'no answer'})`);
  } else {
    const shown = freezeOrder(freeze).slice(0, FREEZE_SHOWN);
    const more = freeze.length - shown.length;
    lines.push(
      `pip freeze (${freeze.length} packages):`,
      ...shown.map((line) => `  ${line}`),
      ...(more > 0 ? [`  … ${more} more in launch-records/launch-${record.launch}.json`] : []),
    );
  }
  return lines;
}

const kindTitle = (kind: 'model' | 'dataset') => (kind === 'model' ? 'Model' : 'Dataset');

/** The printed revisions and the ones the Hub tools resolved (`Model revision: org/name@sha (via …)`). */
export function revisionLines(reproducibility: Reproducibility): string[] {
  return [
    ...reproducibility.revisions.map(
      (revision) => `${kindTitle(revision.kind)} revision: ${revision.value} (printed by the run)`,
    ),
    ...(reproducibility.record?.hubRevisions ?? []).map(
      (revision) =>
        `${kindTitle(revision.kind)} revision: ${revision.repo}@${revision.sha} (resolved by ${revision.via} at ${revision.resolvedAt})`,
    ),
  ];
}

/** The lines `status <run> --full` adds (plain text; the caller puts them in the thread). */
export function reproducibilityLines(reproducibility: Reproducibility): string[] {
  const { record, problem } = reproducibility;
  const lines: string[] = ['Reproducibility:'];
  if (problem !== undefined) lines.push(`⚠️ ${problem}`);
  if (record === undefined) {
    if (problem === undefined) lines.push('Nothing recorded yet (the run has not been launched).');
  } else {
    lines.push(`Launch ${record.launch} at ${record.recordedAt} on ${record.backend}`);
    lines.push(
      `Command: ${record.command.join(' ')}${record.cwd === undefined ? '' : ` (in ${record.cwd})`}`,
    );
    if (record.args !== undefined && record.args.length > 0)
      lines.push(`Arguments: ${record.args.join(' ')}`);
    if (record.config !== undefined && Object.keys(record.config).length > 0)
      lines.push(`Config: ${JSON.stringify(record.config)}`);
    if (record.scriptSha256 !== undefined)
      lines.push(`Script v${record.scriptVersion}, sha256 ${record.scriptSha256}`);
    lines.push(`Seed: ${record.seed ?? 'none passed'}`);
    if (record.git !== undefined) {
      const cut = record.git.diffTruncated === true ? ', diff cut' : '';
      lines.push(
        `Git: ${record.git.commit}${record.git.dirty ? ` (dirty; diff of ${record.git.diff?.split('\n').length ?? 0} lines recorded${cut})` : ' (clean)'}`,
      );
    }
    lines.push(...environmentLines(record));
  }
  lines.push(...revisionLines(reproducibility));
  return lines;
}
