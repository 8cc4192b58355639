import { readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import type { BackendRouter } from './backend-router.js';
import { metricsFileOf } from './derived-file.js';
import type { ClusterInfo, ProcessState } from './executor.js';
import { type MetricRecord, readLastMetrics, tailLines } from './file-tail.js';
import type { GpuAllocator } from './gpu-allocator.js';
import { RUN_FILES } from './records/run-files.js';
import type { RunStore } from './records/run-store.js';
import { isLaunched, type RunMeta } from './records/run-types.js';
import { readTrackerLinks, type TrackerLinks } from './tracker-links.js';

export interface ResumeInfo {
  step: number | null;
  checkpoint: string | null;
  [key: string]: unknown;
}

export interface RunStatusReport {
  meta: RunMeta;
  /** Newest last; at most 5. */
  lastMetrics: MetricRecord[];
  /** Set to `stdout` when the metrics were parsed from output.log (the run does not use the helper). */
  metricsSource?: 'stdout';
  /** Last ~20 lines of output.log. */
  logTail: string[];
  resume: ResumeInfo | undefined;
  /** Executor's view, for runs that have a process or job. */
  process?: ProcessState;
  /** Links to the run in its trackers, as the monitor found them in output.log. */
  trackerLinks?: TrackerLinks;
}

export interface ClusterReport extends ClusterInfo {
  gpusByRun: Array<{ runId: string; name: string; gpus: number; indices: number[] }>;
  hostLoad: number[];
  /** The other configured backends (`SHEPHERD_BACKENDS`), each as its executor reports it. */
  otherBackends: ClusterInfo[];
}

/** The run's resume.json (written by the training script), or undefined when missing or not an object. */
export async function readResume(
  store: Pick<RunStore, 'runDir'>,
  runId: string,
): Promise<ResumeInfo | undefined> {
  try {
    const raw: unknown = JSON.parse(await readFile(path.join(store.runDir(runId), RUN_FILES.resume), 'utf8'));
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
    const record = raw as Record<string, unknown>;
    return {
      ...record,
      step: typeof record.step === 'number' ? record.step : null,
      checkpoint: typeof record.checkpoint === 'string' ? record.checkpoint : null,
    };
  } catch {
    return undefined;
  }
}

/** A meta patch with the last metric step, or nothing when no metric has a step. */
export async function lastStepOf(store: RunStore, meta: RunMeta): Promise<Partial<RunMeta>> {
  const { path: metricsPath } = await metricsFileOf(store.runDir(meta.id));
  const [last] = (await readLastMetrics(metricsPath, 1)).slice(-1);
  return last?.step === undefined ? {} : { lastStep: last.step };
}

interface RunReports {
  status(run: string): Promise<RunStatusReport>;
  clusterInfo(): Promise<ClusterReport>;
}

interface RunReportsOptions {
  store: RunStore;
  executor: BackendRouter;
  allocator: GpuAllocator;
}

/** Read-only views of runs and the cluster; they take no run lock. */
export function createRunReports(options: RunReportsOptions): RunReports {
  const { store, executor, allocator } = options;

  async function status(run: string): Promise<RunStatusReport> {
    const meta = await store.findRun(run);
    const directory = store.runDir(meta.id);
    const metricsFile = await metricsFileOf(directory);
    const [lastMetrics, logTail, resumeInfo, trackerLinks] = await Promise.all([
      readLastMetrics(metricsFile.path, 5),
      tailLines(path.join(directory, RUN_FILES.output), 20),
      readResume(store, meta.id),
      readTrackerLinks(directory),
    ]);
    const report: RunStatusReport = { meta, lastMetrics, logTail, resume: resumeInfo };
    if (trackerLinks !== undefined) report.trackerLinks = trackerLinks;
    if (metricsFile.source === 'stdout' && lastMetrics.length > 0) report.metricsSource = 'stdout';
    if (isLaunched(meta.status)) {
      const state = (await executor.poll([meta])).get(meta.id);
      if (state !== undefined) report.process = state;
    }
    return report;
  }

  async function clusterInfo(): Promise<ClusterReport> {
    const [info, ...otherBackends] = await executor.clusterInfoAll();
    if (info === undefined) throw new Error('the backend router has no backends');
    const report = await defaultBackendReport(info);
    return { ...report, otherBackends };
  }

  /** The default backend's view, with the GPUs each run holds (the local allocator's, or the scheduler's). */
  async function defaultBackendReport(info: ClusterInfo): Promise<Omit<ClusterReport, 'otherBackends'>> {
    const runs = await store.listRuns();
    const byId = new Map(runs.map((meta) => [meta.id, meta]));
    const gpusByRun: ClusterReport['gpusByRun'] = [];
    if (executor.allocatesGpus) {
      for (const meta of runs.filter((candidate) => candidate.status === 'running' && candidate.gpus > 0)) {
        gpusByRun.push({ runId: meta.id, name: meta.name, gpus: meta.gpus, indices: meta.gpuIndices });
      }
      return { ...info, gpusByRun, hostLoad: info.hostLoad ?? loadavg() };
    }
    const owners = await allocator.owners();
    const grouped = new Map<string, number[]>();
    for (const [index, runId] of owners) grouped.set(runId, [...(grouped.get(runId) ?? []), index]);
    for (const [runId, indices] of grouped) {
      const meta = byId.get(runId);
      indices.sort((a, b) => a - b);
      gpusByRun.push({ runId, name: meta?.name ?? runId, gpus: indices.length, indices });
    }
    const gpusTotal = allocator.inventory.length;
    const gpusFree = allocator.inventory.filter((index) => !owners.has(index)).length;
    return { ...info, gpusTotal, gpusFree, gpusByRun, hostLoad: loadavg() };
  }

  return { status, clusterInfo };
}
