import { BACKEND_LABELS, type BackendKind } from '../../config/backend-kinds.js';
import { errorMessage, RunError, ToolPolicyError } from '../../errors.js';
import { codeBlock } from '../../text/code-block.js';
import { backendOf } from '../backend-router.js';
import { formatCommand } from '../launch/command-launch.js';
import type { RunMeta } from '../records/run-types.js';
import type { ClusterReport, RunStatusReport } from '../run-reports.js';
import { trackerLinkLines } from '../tracker-links.js';

/** The sentences run actions answer with: one line per run, a status report, the cluster. */

/** The job handle as each backend names it. */
const JOB_WORDS: Readonly<Record<BackendKind, string>> = {
  local: 'job',
  slurm: 'Slurm job',
  kubernetes: 'Job',
  hfjobs: 'HF job',
};

/** One line per run; `[backend]` is the `runs` list's backend column. */
export function describeRun(meta: RunMeta): string {
  const where =
    meta.gpuIndices.length > 0
      ? ` on GPUs ${meta.gpuIndices.join(',')}`
      : meta.jobId
        ? ` (${JOB_WORDS[meta.executor]} ${meta.jobId})`
        : '';
  const backend = `[${BACKEND_LABELS[backendOf(meta)].flag}] `;
  const step = `${meta.segment === undefined ? '' : `, segment ${meta.segment.index} of ${meta.segment.of}`}${meta.lastStep === undefined ? '' : `, step ${meta.lastStep}`}`;
  const reason = meta.statusReason === undefined ? '' : ` — ${meta.statusReason}`;
  if (meta.watch !== undefined) {
    const watch = meta.watch;
    const source =
      watch.source === 'slurm'
        ? `Slurm job ${meta.jobId ?? '?'}`
        : watch.source === 'kubernetes'
          ? `Kubernetes Job ${watch.namespace}/${watch.job}`
          : watch.source === 'hfjobs'
            ? `HF job ${watch.jobId}`
            : `${watch.logPath}${watch.pid === undefined ? '' : `, pid ${watch.pid}`}`;
    return `${backend}${meta.name} (${meta.id}): watched, ${meta.status.replace('_', ' ')} (${source})${step}${reason}`;
  }
  const environment = meta.environmentName === undefined ? '' : `, env ${meta.environmentName}`;
  return `${backend}${meta.name} (${meta.id}): ${meta.status.replace('_', ' ')}${where}, ${meta.gpus} GPU${meta.gpus === 1 ? '' : 's'}${environment}${step}${reason}`;
}

export function statusText(report: RunStatusReport): string {
  const lines = [describeRun(report.meta)];
  if (report.meta.placement !== undefined) lines.push(`runs on: ${report.meta.placement}`);
  if (report.meta.command !== undefined) lines.push(`command: ${formatCommand(report.meta.command)}`);
  const last = report.lastMetrics.at(-1);
  if (last !== undefined) {
    const values = Object.entries(last.values)
      .map(([name, value]) => `${name}=${formatNumber(value)}`)
      .join(', ');
    const source = report.metricsSource === 'stdout' ? ', read from output.log' : '';
    lines.push(`last metrics (step ${last.step ?? '?'}${source}): ${values}`);
  }
  if (report.lastMetrics.length >= 2) {
    const first = report.lastMetrics[0]?.values.loss;
    const latest = last?.values.loss;
    if (first !== undefined && latest !== undefined) {
      lines.push(
        `loss trend over the last ${report.lastMetrics.length} points: ${formatNumber(first)} → ${formatNumber(latest)}`,
      );
    }
  }
  if (report.resume?.step !== undefined && report.resume.step !== null) {
    lines.push(`last checkpoint: step ${report.resume.step}`);
  }
  const links = trackerLinkLines(report.trackerLinks);
  if (links.length > 0)
    lines.push(`trackers: ${links.map((link) => `${link.label} ${link.value}`).join(' · ')}`);
  if (report.meta.exitCode !== undefined) lines.push(`exit code: ${report.meta.exitCode}`);
  lines.push(...modelLines(report.meta));
  if (report.logTail.length > 0)
    lines.push(`last log lines:\n${codeBlock(report.logTail.slice(-8).join('\n'))}`);
  return lines.join('\n');
}

/** Where a run came from and what was forked from it (`status`). */
export function lineageLines(meta: RunMeta, forks: readonly RunMeta[]): string[] {
  const lines: string[] = [];
  if (meta.forkOf !== undefined) {
    const at = meta.forkOf.checkpoint === null ? '' : ` (${meta.forkOf.checkpoint})`;
    lines.push(`forked from: ${meta.forkOf.runName} (${meta.forkOf.runId}) at step ${meta.forkOf.step}${at}`);
  }
  if (forks.length > 0) {
    lines.push(
      `forks: ${forks.map((fork) => `${fork.name} (${fork.id}, from step ${fork.forkOf?.step ?? '?'})`).join(', ')}`,
    );
  }
  return lines;
}

export function clusterText(info: ClusterReport): string {
  const lines = [`executor: ${info.executor}; GPUs: ${info.gpusTotal} total, ${info.gpusFree} free`];
  for (const entry of info.gpusByRun) {
    lines.push(
      `• ${entry.name}: ${entry.gpus} GPU${entry.gpus === 1 ? '' : 's'}${entry.indices.length ? ` (${entry.indices.join(',')})` : ''}`,
    );
  }
  for (const node of info.nodes ?? []) {
    lines.push(`• node ${node.name}: ${node.state}, GPUs ${node.gpusAllocated}/${node.gpusTotal} allocated`);
  }
  if (info.queueLength !== undefined) lines.push(`queue length: ${info.queueLength}`);
  if (info.hostLoad.length > 0)
    lines.push(`host load: ${info.hostLoad.map((value) => value.toFixed(2)).join(' ')}`);
  for (const note of info.notes ?? []) lines.push(note);
  for (const other of info.otherBackends) {
    lines.push(`executor: ${other.executor}; GPUs: ${other.gpusTotal} total, ${other.gpusFree} free`);
    for (const node of other.nodes ?? []) {
      lines.push(
        `• node ${node.name}: ${node.state}, GPUs ${node.gpusAllocated}/${node.gpusTotal} allocated`,
      );
    }
    if (other.queueLength !== undefined) lines.push(`queue length: ${other.queueLength}`);
    for (const note of other.notes ?? []) lines.push(note);
  }
  return lines.join('\n');
}

/** The evaluation, the event files' `--logdir`, the saved model and where it was published. */
function modelLines(meta: RunMeta): string[] {
  const lines: string[] = [];
  if (meta.evalCommand !== undefined) lines.push(`evaluation: ${meta.evalCommand}`);
  if (meta.logDir !== undefined) lines.push(`logdir: ${meta.logDir}`);
  const evaluation = meta.evaluation;
  if (evaluation !== undefined) {
    const results = Object.entries(evaluation.results)
      .map(([name, value]) => `${name}=${formatNumber(value)}`)
      .join(', ');
    const exit = evaluation.exitCode === undefined ? '' : ` (exit ${evaluation.exitCode})`;
    lines.push(`eval ${evaluation.status}${exit}${results === '' ? '' : `: ${results}`}`);
  }
  if (meta.model !== undefined) lines.push(`model: ${meta.model.path}`);
  const push = meta.hubPushes?.at(-1);
  if (push !== undefined)
    lines.push(`on the Hub: ${push.url} (commit ${push.commit.slice(0, 8)}, ${push.at})`);
  return lines;
}

function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1000 || Number.isInteger(value) ? String(value) : value.toPrecision(4);
}

/** A sentence for an expected failure, or a rethrow for a bug. */
export function userFacingError(error: unknown): string {
  if (error instanceof RunError || error instanceof ToolPolicyError) return error.message;
  return `something went wrong: ${errorMessage(error)}`;
}
