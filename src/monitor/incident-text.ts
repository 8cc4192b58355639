import { definedOnly } from '../defined-only.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { type CrashFinding, extractTraceback } from './detectors/crash.js';
import { formatDuration, formatMetricValue } from './detectors/finished.js';
import { plateauSuggestion } from './detectors/plateau.js';
import type { AlertRule } from './policy-checks.js';
import type { Incident } from './types.js';

/**
 * The words of the monitor's own incidents: title, summary and the chart hints. Detectors decide *whether*
 * something happened (evaluate.ts); this module decides what the thread reads.
 */
export type IncidentText = Omit<Incident, 'id' | 'runId' | 'kind' | 'severity' | 'at'>;

export function nanText(run: string, step: number, described: string, metrics: string[]): IncidentText {
  return {
    title: `${run}: non-finite metric at step ${step}`,
    summary: `${run}: ${described} at step ${step}.`,
    metrics,
    step,
    highlightSteps: [step, step],
  };
}

export function spikeText(
  run: string,
  metric: string,
  step: number,
  value: number,
  median: number,
  window: number,
): IncidentText {
  return {
    title: `${run}: ${metric} spike at step ${step}`,
    summary: `${run}: ${metric} spiked to ${formatMetricValue(value)} at step ${step} (median ${formatMetricValue(median)} over the last ${window} points).`,
    metrics: [metric],
    step,
    highlightSteps: [step, step],
  };
}

export function divergenceText(
  run: string,
  metric: string,
  divergence: { from: number; to: number; rise: number },
  window: number,
  fromStep: number,
  lastStep: number,
): IncidentText {
  return {
    title: `${run}: ${metric} is diverging`,
    summary: `${run}: ${metric} is rising — ${formatMetricValue(divergence.from)} → ${formatMetricValue(divergence.to)} (+${Math.round(divergence.rise * 100)}%) over the last ${window} points (step ${lastStep}).`,
    metrics: [metric],
    step: lastStep,
    highlightSteps: [fromStep, lastStep],
  };
}

export function plateauText(
  run: string,
  metric: string,
  plateau: { bestCase: number | undefined; now: number },
  fromStep: number,
  lastStep: number,
  maxSteps: number | undefined,
): IncidentText {
  return {
    title: `${run}: ${metric} has stopped improving`,
    summary: `${run}: ${metric} has stopped improving — over steps ${fromStep}–${lastStep} its trend promises at most ${formatPercent(plateau.bestCase)} improvement (robust slope, 99 % bound; now ${formatMetricValue(plateau.now)}). ${plateauSuggestion(lastStep, maxSteps)}`,
    metrics: [metric],
    step: lastStep,
    highlightSteps: [fromStep, lastStep],
  };
}

export function stallText(
  run: string,
  idleMs: number,
  lastStep: number | undefined,
  metrics: string[],
  dump: { how: string | undefined; mainFrames: string | undefined },
): IncidentText {
  return definedOnly({
    title: `${run}: no progress`,
    summary: `${run}: no new step for ${formatDuration(idleMs)}${lastStep === undefined ? '' : ` (last step ${lastStep})`}; the process is still alive. ${stackSentence(dump)}`,
    metrics,
    step: lastStep,
  });
}

/** What the hang dump showed, or why there is none. */
function stackSentence(dump: { how: string | undefined; mainFrames: string | undefined }): string {
  if (dump.mainFrames !== undefined && dump.mainFrames !== '')
    return `Main thread stuck in: ${dump.mainFrames} (innermost first).`;
  if (dump.how !== undefined) return `Stacks were asked for (${dump.how}) but no dump reached output.log.`;
  return 'No stack dump: none could be asked for (a script without the Shepherd helper and no py-spy, a container, or a remote backend).';
}

/** The `--eval` command failed: its traceback, like a crash; the training result stays. */
export function evalFailedText(meta: RunMeta, logTail: string, lastStep: number | undefined): IncidentText {
  const exit = meta.evaluation?.exitCode;
  return {
    title: `${meta.name}: evaluation failed`,
    summary: `${meta.name}: training completed${stepSuffix(lastStep)}, but its evaluation \`${meta.evalCommand ?? ''}\` failed${exit === undefined ? '' : ` (exit ${exit})`}. The training result and its checkpoints stay.`,
    metrics: [],
    traceback: extractTraceback(logTail),
    ...definedOnly({ step: lastStep, exitCode: exit }),
  };
}

export function finishedText(
  run: string,
  durationMs: number,
  lastStep: number | undefined,
  metricsSummary: string,
  metrics: string[],
): IncidentText {
  return definedOnly({
    title: `${run} finished`,
    summary: `${run} finished in ${formatDuration(durationMs)}${stepSuffix(lastStep)}${metricsSummary === '' ? '.' : ` — ${metricsSummary}.`}`,
    metrics,
    step: lastStep,
    exitCode: 0,
  });
}

export function crashText(
  run: string,
  crash: CrashFinding,
  lastStep: number | undefined,
  metrics: string[],
  launch: number,
): IncidentText {
  const how = crash.signal === undefined ? `exit ${crash.exitCode}` : `signal ${crash.signal}`;
  const retries =
    crash.retries === undefined
      ? ''
      : ` No automatic relaunch left after ${crash.retries.length}:\n${crash.retries.map((line) => `• ${line}`).join('\n')}`;
  return definedOnly({
    title: `${run} failed`,
    summary: `${run} failed (${how})${stepSuffix(lastStep)} — ${crash.label}.${retries}`,
    retries: crash.retries,
    metrics,
    step: lastStep,
    // The launch whose exit this is, even when none of its metric lines has been read yet.
    launch,
    traceback: crash.traceback,
    crashClass: crash.crashClass,
    exitCode: crash.exitCode,
    signal: crash.signal,
  });
}

export function gradNormText(
  run: string,
  metric: string,
  value: number,
  step: number,
  median: number,
  points: number,
  metrics: string[],
): IncidentText {
  return {
    title: `${run}: ${metric} is exploding`,
    summary: `${run}: ${metric} is ${formatMetricValue(value)} at step ${step}, ${points} points in a row far above its usual ${formatMetricValue(median)} — this usually comes before a NaN. Lower the learning rate or clip gradients.`,
    metrics,
    step,
    highlightSteps: [step, step],
  };
}

export function overfittingText(
  run: string,
  metric: string,
  best: { step: number; value: number },
  now: { step: number; value: number },
  evaluations: number,
  metrics: string[],
): IncidentText {
  return {
    title: `${run}: ${metric} is rising while the training loss falls`,
    summary: `${run}: ${metric} rose for ${evaluations} evaluations, from ${formatMetricValue(best.value)} at step ${best.step} to ${formatMetricValue(now.value)} at step ${now.step}, while the training loss kept falling — the model is overfitting. The checkpoint near step ${best.step} is the one to keep; stop early, add data or regularise.`,
    metrics,
    step: now.step,
    highlightSteps: [best.step, now.step],
  };
}

export function throughputText(
  run: string,
  rate: number,
  median: number | undefined,
  ticks: number,
  lastStep: number | undefined,
  metrics: string[],
): IncidentText {
  return definedOnly({
    title: `${run}: throughput dropped`,
    summary: `${run}: ${formatMetricValue(rate)} steps/s for ${ticks} ticks, under half the usual ${formatMetricValue(median ?? Number.NaN)} (step ${lastStep}). A straggler node, a throttled GPU or a starving data loader are the usual causes.`,
    metrics,
    step: lastStep,
  });
}

export function idleGpuText(
  run: string,
  gpuIndices: readonly number[],
  utilPercent: number,
  idleMs: number,
  lastStep: number | undefined,
  metrics: string[],
): IncidentText {
  return definedOnly({
    title: `${run}: GPUs idle`,
    summary: `${run}: GPU ${gpuIndices.join(', ')} under ${utilPercent} % utilisation for ${formatDuration(idleMs)} while the process is alive — it may be waiting on data, a lock or a hung collective.`,
    metrics,
    step: lastStep,
  });
}

export function ruleText(
  rule: AlertRule,
  run: string,
  step: number | undefined,
  value: number,
  lossMetrics: string[],
): IncidentText {
  return {
    title: `${run}: rule "${rule.text}"`,
    summary: `${run}: ${rule.metric} is ${formatMetricValue(value)}${stepSuffix(step)} — your rule \`when ${rule.text}\` (set by ${rule.createdBy.name}).`,
    metrics: rule.metric === 'step' ? lossMetrics.slice(0, 1) : [rule.metric],
    ...(step === undefined ? {} : { step, highlightSteps: [step, step] as [number, number] }),
  };
}

function stepSuffix(step: number | undefined): string {
  return step === undefined ? '' : ` at step ${step}`;
}

function formatPercent(fraction: number | undefined): string {
  if (fraction === undefined || !Number.isFinite(fraction)) return '?';
  return `${Math.max(0, fraction * 100).toFixed(fraction < 0.001 ? 2 : 1)} %`;
}
