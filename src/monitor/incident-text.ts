import { definedOnly } from '../defined-only.js';
import type { CrashFinding } from './detectors/crash.js';
import { formatDuration, formatMetricValue } from './detectors/finished.js';
import { plateauSuggestion } from './detectors/plateau.js';
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
): IncidentText {
  return definedOnly({
    title: `${run}: no progress`,
    summary: `${run}: no new step for ${formatDuration(idleMs)}${lastStep === undefined ? '' : ` (last step ${lastStep})`}; the process is still alive.`,
    metrics,
    step: lastStep,
  });
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
  return definedOnly({
    title: `${run} failed`,
    summary: `${run} failed (${how})${stepSuffix(lastStep)} — ${crash.label}.`,
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

function stepSuffix(step: number | undefined): string {
  return step === undefined ? '' : ` at step ${step}`;
}

function formatPercent(fraction: number | undefined): string {
  if (fraction === undefined || !Number.isFinite(fraction)) return '?';
  return `${Math.max(0, fraction * 100).toFixed(fraction < 0.001 ? 2 : 1)} %`;
}
