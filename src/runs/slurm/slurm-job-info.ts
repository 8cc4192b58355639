import path from 'node:path';
import { definedOnly } from '../../defined-only.js';
import { RunError } from '../../errors.js';
import type { RunCommand } from './slurm-command.js';
import { shortenSlurmError } from './slurm-parse.js';

/** What `watch slurm:<id>` needs to know about a job Shepherd did not submit. */
interface SlurmJobInfo {
  jobId: string;
  name: string;
  state: string;
  /** Absolute path of the job's standard output (patterns like `%j` expanded). */
  outputPath: string;
}

/** Fields of `scontrol show job -o <id>` (one line of `Key=Value` words). */
export function parseScontrolJob(output: string): Record<string, string> {
  const fields: Record<string, string> = {};
  const line = output.split('\n').find((text) => text.includes('JobId=')) ?? '';
  for (const match of line.matchAll(/(?:^|\s)([A-Za-z:/]+)=(\S*)/g)) {
    const [, key, value] = match;
    if (key !== undefined && value !== undefined && !(key in fields)) fields[key] = value;
  }
  return fields;
}

/** Expands the `sbatch --output` filename patterns Slurm may leave in the path. */
export function expandOutputPattern(
  pattern: string,
  job: { jobId: string; name: string; user?: string; arrayJobId?: string; arrayTaskId?: string },
): string {
  return pattern.replace(/%(%|j|J|x|u|A|a)/g, (_all, code: string) => {
    switch (code) {
      case '%':
        return '%';
      case 'j':
      case 'J':
        return job.jobId;
      case 'x':
        return job.name;
      case 'u':
        return job.user ?? '';
      case 'A':
        return job.arrayJobId ?? job.jobId;
      case 'a':
        return job.arrayTaskId ?? '';
      default:
        return '';
    }
  });
}

/** Reads the job's name, state and output path from `scontrol show job`, else from `sacct`. */
export async function readSlurmJobInfo(run: RunCommand, jobId: string): Promise<SlurmJobInfo> {
  const shown = await run('scontrol', ['show', 'job', '-o', jobId]);
  if (shown.exitCode === 0) {
    const fields = parseScontrolJob(shown.stdout);
    const name = fields.JobName ?? `job-${jobId}`;
    const user = (fields.UserId ?? '').replace(/\(.*$/, '');
    const workDir = fields.WorkDir ?? '/';
    const raw = fields.StdOut ?? path.join(workDir, `slurm-${jobId}.out`);
    const expanded = expandOutputPattern(raw, {
      jobId,
      name,
      user,
      ...definedOnly({ arrayJobId: fields.ArrayJobId, arrayTaskId: fields.ArrayTaskId }),
    });
    return {
      jobId,
      name,
      state: fields.JobState ?? 'UNKNOWN',
      outputPath: path.resolve(workDir, expanded),
    };
  }
  // Gone from the controller's memory: accounting may still know it (StdOut needs Slurm ≥ 23.02).
  const accounted = await run('sacct', ['-X', '-n', '-P', '-j', jobId, '-o', 'JobName,State,WorkDir,StdOut']);
  const [name, state, workDir, stdout] = accounted.stdout.trim().split('\n')[0]?.split('|') ?? [];
  if (accounted.exitCode === 0 && name !== undefined && stdout !== undefined && stdout !== '') {
    return {
      jobId,
      name,
      state: (state ?? 'UNKNOWN').split(/\s+/)[0] ?? 'UNKNOWN',
      outputPath: path.resolve(workDir ?? '/', expandOutputPattern(stdout, { jobId, name })),
    };
  }
  throw new RunError(
    'slurm_job_not_found',
    `Slurm does not know job ${jobId} (scontrol: ${shortenSlurmError(shown.stderr || shown.stdout) || 'no answer'})`,
  );
}
