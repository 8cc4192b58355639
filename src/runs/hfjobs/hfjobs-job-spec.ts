import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { RunError } from '../../errors.js';
import { evaluationLines } from '../evaluation-script.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import type { HfJobSpec } from './hfjobs-client.js';

/**
 * What an HF job carries. HF Jobs has no file upload, so the script travels inside the job the way ML Intern
 * sends an inline script (base64 in the command): `python3 -u -c <bootstrap> <payload…>`, where the payload is
 * the script and Shepherd's helper, zlib-compressed, base64, cut into arguments under Linux's 128 KiB limit
 * per argument. The bootstrap (`python/shepherd_job_bootstrap.py`) writes them out and execs the run.
 */

/** Labels on every job Shepherd starts, so a person (or `listJobs`) can tell which run a job belongs to. */
export const HF_JOB_LABELS = { managedBy: 'managed-by', run: 'shepherd-run' } as const;

const BOOTSTRAP_FILE = 'shepherd_job_bootstrap.py';
/** Where the helper goes inside the job's directory. */
const RUNTIME_DIR = '.shepherd';
/** One argument stays well under MAX_ARG_STRLEN (131072 bytes). */
const PIECE_CHARS = 100_000;
/** All pieces together stay well under ARG_MAX (2 MiB with the environment). */
const MAX_PAYLOAD_CHARS = 1_200_000;

interface Payload {
  files: Record<string, string>;
  runtime: string;
  command: string[] | null;
  script: string | null;
  args: string[];
  cwd: string;
  /** With `--eval`: bash that runs the training argv (`"$@"`), then the eval, reporting in the log. */
  wrapper?: string;
}

async function pythonFiles(directory: string, prefix: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    if (entry.name === '__pycache__') continue;
    const full = path.join(directory, entry.name);
    const relative = path.posix.join(prefix, entry.name);
    if (entry.isDirectory()) Object.assign(files, await pythonFiles(full, relative));
    else if (entry.name.endsWith('.py')) files[relative] = await readFile(full, 'utf8');
  }
  return files;
}

/** The script and how to start it: `train.py` of the run directory, or a command run's argv and `.py`. */
type RunStart = Omit<Payload, 'files' | 'runtime'> & { source?: string };

async function runFiles(meta: RunMeta, runDir: string): Promise<RunStart> {
  const args = meta.args ?? [];
  if (meta.command === undefined) {
    const source = await readFile(path.join(runDir, RUN_FILES.script), 'utf8').catch(() => {
      throw new RunError('no_script', `run ${meta.name} has no ${RUN_FILES.script} to send to HF Jobs`);
    });
    return { command: null, script: RUN_FILES.script, source, args, cwd: '.' };
  }
  if (meta.scriptPath === undefined) return { command: meta.command, script: null, args, cwd: '.' };
  const cwd = meta.cwd ?? path.dirname(meta.scriptPath);
  const relative = path.relative(cwd, meta.scriptPath);
  if (relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new RunError(
      'invalid_run',
      `${meta.scriptPath} is outside the command's directory ${cwd}; HF Jobs gets only that directory's script`,
    );
  }
  const source = await readFile(meta.scriptPath, 'utf8');
  const posixRelative = relative.split(path.sep).join('/');
  // The command may name the script by its absolute path on this host; in the job it sits in the job's directory.
  const command = meta.command.map((word) => (word === meta.scriptPath ? posixRelative : word));
  return { command, script: posixRelative, source, args, cwd: '.' };
}

/** Refusals for what a single HF job cannot do, before anything is sent. */
function checkRunFitsHfJobs(meta: Pick<RunMeta, 'name' | 'nodes' | 'environmentName'>): void {
  if ((meta.nodes ?? 1) > 1) {
    throw new RunError(
      'invalid_run',
      `HF Jobs runs one machine per job; ${meta.name} asks for ${meta.nodes} nodes`,
    );
  }
  if (meta.environmentName !== undefined) {
    throw new RunError(
      'invalid_run',
      `environment ${meta.environmentName} lives on this host; an HF job runs in its image (--image) instead`,
    );
  }
}

interface HfJobSpecBuilder {
  build(input: { meta: RunMeta; runDir: string; image: string; flavor: string }): Promise<HfJobSpec>;
}

export function createHfJobSpecBuilder(options: {
  /** Directory with `shepherd.py`, `shepherd/` and the bootstrap (`PYTHON_RUNTIME_DIR`). */
  helperDir: string;
  /** Secrets for every job (encrypted by the Hub); the bot's own Hub token is never among them by default. */
  secrets?: Readonly<Record<string, string>>;
}): HfJobSpecBuilder {
  let runtime: Promise<{ bootstrap: string; helper: Record<string, string> }> | undefined;
  const loadRuntime = () => {
    runtime ??= (async () => ({
      bootstrap: await readFile(path.join(options.helperDir, BOOTSTRAP_FILE), 'utf8'),
      helper: {
        [path.posix.join(RUNTIME_DIR, 'shepherd.py')]: await readFile(
          path.join(options.helperDir, 'shepherd.py'),
          'utf8',
        ),
        ...(await pythonFiles(
          path.join(options.helperDir, 'shepherd'),
          path.posix.join(RUNTIME_DIR, 'shepherd'),
        )),
      },
    }))();
    return runtime;
  };

  return {
    async build({ meta, runDir, image, flavor }) {
      checkRunFitsHfJobs(meta);
      const { bootstrap, helper } = await loadRuntime();
      const { source, ...start } = await runFiles(meta, runDir);
      const files = {
        ...helper,
        ...(source === undefined || start.script === null ? {} : { [start.script]: source }),
      };
      const payload: Payload = { files, runtime: RUNTIME_DIR, ...start };
      if (meta.evalCommand !== undefined)
        payload.wrapper = evaluationLines('"$@"', meta.evalCommand, 'forward', { recording: 'log' }).join(
          '\n',
        );
      const encoded = deflateSync(Buffer.from(JSON.stringify(payload), 'utf8'), { level: 9 }).toString(
        'base64',
      );
      if (encoded.length > MAX_PAYLOAD_CHARS) {
        throw new RunError(
          'invalid_run',
          `the script is too large to send inside an HF job (${encoded.length} characters compressed)`,
        );
      }
      const pieces: string[] = [];
      for (let offset = 0; offset < encoded.length; offset += PIECE_CHARS) {
        pieces.push(encoded.slice(offset, offset + PIECE_CHARS));
      }
      const spec: HfJobSpec = {
        dockerImage: image,
        flavor,
        command: ['python3', '-u', '-c', bootstrap, ...pieces],
        environment: {
          SHEPHERD_RUN_ID: meta.id,
          SHEPHERD_RUN_NAME: meta.name,
          SHEPHERD_RUN_CONFIG: JSON.stringify(meta.config ?? {}),
          SHEPHERD_LAUNCH: String(meta.launchCount),
          PYTHONUNBUFFERED: '1',
        },
        // Without it the Hub ends the job after its default of 30 minutes.
        timeoutSeconds: Math.max(60, Math.ceil(meta.maxHours * 3600)),
        labels: { [HF_JOB_LABELS.managedBy]: 'shepherd', [HF_JOB_LABELS.run]: meta.id },
      };
      if (options.secrets !== undefined && Object.keys(options.secrets).length > 0)
        spec.secrets = { ...options.secrets };
      return spec;
    },
  };
}
