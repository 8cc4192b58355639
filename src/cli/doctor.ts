import { readFile } from 'node:fs/promises';
import type { Config } from '../config/config.js';
import { passedTrackerVariables, TRACKER_VARIABLES } from '../runs/launch/tracker-credentials.js';
import { checkDisk, checkGpus, checkPython, checkSlurm, type ProbeEnvironment } from './check-local.js';
import { checkRedis } from './check-redis.js';
import { checkDiscord, checkLlm, checkSlack, manifestBotScopes } from './check-services.js';
import { type CheckOutcome, outcome } from './doctor-types.js';

interface DoctorOptions {
  /** PATH (and SLURM_CONF) for the local probes: python, nvidia-smi, sinfo. */
  environment: ProbeEnvironment;
  fetch?: typeof fetch;
  /** Path of the Slack app manifest whose scopes the token must have. */
  manifestPath?: string;
  nvidiaSmi?: string;
  /** What training processes inherit (scrubbed): which tracker variables reach runs. */
  runEnvironment?: ProbeEnvironment;
}

interface DoctorReport {
  results: CheckOutcome[];
  /** A required check failed. */
  failed: boolean;
}

/** Every check, in the order a person would fix them. Parts that are not configured are skipped. */
export async function runDoctor(config: Config, options: DoctorOptions): Promise<DoctorReport> {
  const fetcher = options.fetch ?? fetch;
  const manifest = await readFile(
    options.manifestPath ?? new URL('../../../slack/manifest.yaml', import.meta.url),
    'utf8',
  ).catch(() => readFile(new URL('../../slack/manifest.yaml', import.meta.url), 'utf8').catch(() => ''));
  const groups = await Promise.all([
    checkRedis(config),
    checkLlm(config.llm, fetcher),
    checkSlack(config.slack, manifestBotScopes(manifest), fetcher),
    checkDiscord(config.discord, fetcher),
    checkPython(config.runs.python, options.environment),
    checkGpus(config.runs.gpus, options.environment, options.nvidiaSmi),
    checkSlurm(config, options.environment),
    checkDisk(config.dataDir),
    [checkTrackerVariables(options.runEnvironment ?? {})],
  ]);
  const results = groups.flat();
  return { results, failed: results.some((result) => result.status === 'fail') };
}

/** Names only: which tracker variables runs get (`SHEPHERD_RUN_ENV_<NAME>`, or `WANDB_MODE` passed through). */
function checkTrackerVariables(environment: ProbeEnvironment): CheckOutcome {
  const passed = passedTrackerVariables(environment);
  const missing = TRACKER_VARIABLES.filter((name) => !passed.includes(name));
  const detail = `passed to runs: ${passed.length === 0 ? 'none' : passed.join(', ')}; not passed: ${missing.length === 0 ? 'none' : missing.join(', ')}`;
  return outcome('tracker variables', 'ok', detail);
}

const MARK: Record<CheckOutcome['status'], string> = { ok: 'ok', warn: 'warn', fail: 'FAIL', skip: 'skip' };

/** A plain table: status, check, finding, and the fix under any problem. */
export function formatDoctorTable(report: DoctorReport): string {
  const width = Math.max(...report.results.map((result) => result.name.length), 5);
  const lines = [`${'status'.padEnd(6)}  ${'check'.padEnd(width)}  detail`];
  for (const result of report.results) {
    lines.push(`${MARK[result.status].padEnd(6)}  ${result.name.padEnd(width)}  ${result.detail}`);
    if (result.fix !== undefined && (result.status === 'fail' || result.status === 'warn')) {
      lines.push(`${''.padEnd(6)}  ${''.padEnd(width)}  fix: ${result.fix}`);
    }
  }
  const failures = report.results.filter((result) => result.status === 'fail').length;
  const warnings = report.results.filter((result) => result.status === 'warn').length;
  lines.push(
    '',
    failures === 0 ? `all required checks passed (${warnings} warning(s))` : `${failures} check(s) failed`,
  );
  return lines.join('\n');
}
