import { untrustedBlock } from '../agent/untrusted.js';
import type { ProcessState } from '../runs/executor.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { redactedTail, redactSecrets } from '../text/redact.js';
import { extractTraceback } from './detectors/crash.js';
import { formatDuration, formatMetricValue } from './detectors/finished.js';
import { finiteOnly, median } from './detectors/robust.js';
import type { RollingState } from './rolling-stats.js';
import type { Incident } from './types.js';

/**
 * What the LLM sees when it triages a run: status, exit info, traceback, recent metrics with their
 * trends, and the current script. Every part is bounded so the prompt stays small whatever the run did.
 */
export interface TriageSnapshot {
  run: { id: string; name: string; status: string; scriptVersion: number; launchCount: number; gpus: number };
  process: string;
  duration?: string;
  incident?: { kind: string; summary: string; crashClass?: string };
  traceback?: string;
  /** A stall's hang dump: every thread's stack. */
  stackDump?: string;
  metrics: Array<{
    name: string;
    last: string;
    min: string;
    max: string;
    trend: string;
    nonFinite: number;
    recent: string;
  }>;
  lastStep?: number;
  /** `stdout` when the metrics were parsed from output.log (the script does not use the helper). */
  metricsSource?: 'stdout';
  logTail: string;
  script?: string;
  /** False when the script shown was cut or had secrets redacted: the answer may then not be a FIX. */
  scriptComplete?: boolean;
}

const MAX_METRICS = 8;
const RECENT_POINTS = 12;
const LOG_TAIL_CHARS = 1500;
const MAX_SCRIPT_CHARS = 12_000;

function describeProcess(state: ProcessState): string {
  switch (state.kind) {
    case 'alive':
      return 'running';
    case 'pending':
      return `pending${state.reason === undefined ? '' : ` (${state.reason})`}`;
    case 'exited':
      return `exited with code ${state.exitCode}${state.crashClass === undefined ? '' : ` (${state.crashClass})`}`;
    case 'signaled':
      return `killed by ${state.signal}${state.crashClass === undefined ? '' : ` (${state.crashClass})`}`;
    default:
      return `unknown${state.reason === undefined ? '' : ` (${state.reason})`}`;
  }
}

/** Keep the head and tail of a long text, marking the cut. */
function truncateMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const head = Math.floor(maxChars * 0.6);
  const tail = maxChars - head - 40;
  return `${text.slice(0, head)}\n# … ${text.length - head - tail} characters omitted …\n${text.slice(-tail)}`;
}

export function buildTriageSnapshot(input: {
  meta: RunMeta;
  processState: ProcessState;
  rolling: RollingState;
  logTail: string;
  now: number;
  script?: string;
  incident?: Incident;
}): TriageSnapshot {
  const { meta, rolling } = input;
  const snapshot: TriageSnapshot = {
    run: {
      id: meta.id,
      name: meta.name,
      status: meta.status,
      scriptVersion: meta.scriptVersion,
      launchCount: meta.launchCount,
      gpus: meta.gpus,
    },
    process: describeProcess(input.processState),
    metrics: [],
    logTail: redactedTail(input.logTail, LOG_TAIL_CHARS),
  };
  if (meta.startedAt !== undefined)
    snapshot.duration = formatDuration(input.now - Date.parse(meta.startedAt));
  if (rolling.lastStep !== undefined) snapshot.lastStep = rolling.lastStep;
  if (input.incident !== undefined) {
    snapshot.incident = { kind: input.incident.kind, summary: input.incident.summary };
    if (input.incident.crashClass !== undefined) snapshot.incident.crashClass = input.incident.crashClass;
    if (input.incident.traceback !== undefined) snapshot.traceback = input.incident.traceback;
    if (input.incident.stackDump !== undefined) snapshot.stackDump = input.incident.stackDump;
  }
  if (
    snapshot.traceback === undefined &&
    (input.processState.kind === 'exited' || input.processState.kind === 'signaled')
  ) {
    snapshot.traceback = extractTraceback(input.logTail);
  }
  const names = Object.keys(rolling.metrics)
    .sort((a, b) => Number(!/loss/i.test(a)) - Number(!/loss/i.test(b)) || a.localeCompare(b))
    .slice(0, MAX_METRICS);
  for (const name of names) {
    const series = rolling.metrics[name];
    if (series === undefined) continue;
    const finite = finiteOnly(series.values);
    const quarter = Math.max(1, Math.floor(finite.length / 4));
    const early = median(finite.slice(0, quarter));
    const late = median(finite.slice(-quarter));
    const change =
      Number.isFinite(early) && early !== 0 ? ((late - early) / Math.abs(early)) * 100 : Number.NaN;
    const recent = series.values
      .slice(-RECENT_POINTS)
      .map((value, index, list) => {
        const step = series.steps[series.steps.length - list.length + index];
        return `${step}:${formatMetricValue(value)}`;
      })
      .join(' ');
    snapshot.metrics.push({
      name,
      last: formatMetricValue(series.values.at(-1) ?? Number.NaN),
      min: finite.length === 0 ? 'n/a' : formatMetricValue(Math.min(...finite)),
      max: finite.length === 0 ? 'n/a' : formatMetricValue(Math.max(...finite)),
      trend: Number.isFinite(change)
        ? `${change >= 0 ? '+' : ''}${change.toFixed(1)}% over the last ${finite.length} points`
        : 'n/a',
      nonFinite: series.nonFinite,
      recent,
    });
  }
  if (input.script !== undefined) {
    const redacted = redactSecrets(input.script);
    snapshot.script = truncateMiddle(redacted, MAX_SCRIPT_CHARS);
    snapshot.scriptComplete = redacted === input.script && snapshot.script === redacted;
  }
  return snapshot;
}

/** Render a snapshot as the compact text block inserted into the triage prompt. */
export function renderTriageSnapshot(snapshot: TriageSnapshot): string {
  const lines: string[] = [
    `Run: ${snapshot.run.name} (id ${snapshot.run.id}), status ${snapshot.run.status}, script v${snapshot.run.scriptVersion}, launch ${snapshot.run.launchCount}, ${snapshot.run.gpus} GPU(s)`,
    `Process: ${snapshot.process}${snapshot.duration === undefined ? '' : `, running for ${snapshot.duration}`}${snapshot.lastStep === undefined ? '' : `, last step ${snapshot.lastStep}`}`,
  ];
  if (snapshot.incident !== undefined) {
    lines.push(
      `Incident: ${snapshot.incident.kind}${snapshot.incident.crashClass === undefined ? '' : ` (${snapshot.incident.crashClass})`} — ${snapshot.incident.summary}`,
    );
  }
  lines.push(
    '',
    `Metrics${snapshot.metricsSource === 'stdout' ? ' (parsed from what the script prints to output.log)' : ''} (name: last, min, max, trend, non-finite count; recent step:value):`,
  );
  if (snapshot.metrics.length === 0) lines.push('  (no metrics logged yet)');
  for (const metric of snapshot.metrics) {
    lines.push(
      `  ${metric.name}: last ${metric.last}, min ${metric.min}, max ${metric.max}, ${metric.trend}, non-finite ${metric.nonFinite}`,
      `    recent ${metric.recent}`,
    );
  }
  if (snapshot.traceback !== undefined && snapshot.traceback !== '') {
    lines.push('', 'Traceback:', untrustedBlock('traceback', snapshot.traceback));
  }
  if (snapshot.stackDump !== undefined) {
    lines.push(
      '',
      'Hang dump: every thread of the live process (most recent call first):',
      untrustedBlock('stacks', snapshot.stackDump),
    );
  }
  // Run output and the script are data: fenced in boundaries their content cannot close.
  lines.push('', 'Last lines of output.log:', untrustedBlock('log', snapshot.logTail.trimEnd()));
  if (snapshot.script !== undefined)
    lines.push('', 'Current train.py:', untrustedBlock('file', snapshot.script, { name: 'train.py' }));
  if (snapshot.scriptComplete === false) {
    lines.push(
      '',
      'The train.py above is incomplete (cut for length or with secrets redacted). Do NOT answer FIX: a complete new train.py cannot be written from it. Answer LGTM or WARNING.',
    );
  }
  return lines.join('\n');
}
