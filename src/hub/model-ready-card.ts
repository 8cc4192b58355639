import type { Card } from '../bot/chat-adapter.js';
import { definedOnly } from '../defined-only.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { type TrackerLinks, trackerLinkLines } from '../runs/tracker-links.js';
import type { ModelSummary } from './model-summary.js';

/** Buttons of the model-ready card (`<verb>:<run id>`); the action router keys on these. */
export const MODEL_ACTIONS = { push: 'hub-push', fork: 'run-fork', compare: 'run-compare' } as const;

export function formatValue(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '—';
  if (value !== 0 && (Math.abs(value) < 1e-3 || Math.abs(value) >= 1e6)) return value.toExponential(3);
  return String(Number(value.toPrecision(5)));
}

export function formatWall(ms: number | undefined): string {
  if (ms === undefined) return '—';
  const seconds = Math.round(ms / 1000);
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  if (hours > 0) return `${hours} h ${minutes} min`;
  return minutes > 0 ? `${minutes} min ${seconds % 60} s` : `${seconds} s`;
}

/** "eval_loss 0.31, eval_accuracy 0.9" or undefined when there is none. */
export function evalLine(summary: ModelSummary): string | undefined {
  const entries = Object.entries(summary.evalResults);
  if (entries.length === 0) return undefined;
  return entries.map(([name, value]) => `${name} ${formatValue(value)}`).join(', ');
}

/**
 * The finished card of a run that saved a model: metric (final and best), eval results, best checkpoint,
 * time and cost, the run's tracker links (absent when SHEPHERD_TRACKER_LINKS=off), the chart, and
 * Push to Hub / Fork / Compare.
 */
export function modelReadyCard(
  meta: RunMeta,
  summary: ModelSummary,
  png: Uint8Array | undefined,
  links?: TrackerLinks,
): Card {
  const { metric } = summary;
  const where = meta.model?.location === undefined ? '' : ` (in ${meta.model.location})`;
  const lines = [`${meta.name} completed and saved its model: \`${meta.model?.path ?? '?'}\`${where}.`];
  const evaluation = evalLine(summary);
  if (evaluation !== undefined) lines.push(`Eval: ${evaluation}`);
  if (summary.evalStatus === 'failed') lines.push('⚠️ The evaluation failed; see the alert above.');
  const pushed = meta.hubPushes?.at(-1);
  if (pushed !== undefined) lines.push(`On the Hub: ${pushed.url}`);
  const fields = [
    { label: 'Run', value: meta.name },
    { label: `${metric.name} (final)`, value: formatValue(metric.final) },
    {
      label: `${metric.name} (best, ${metric.mode})`,
      value: `${formatValue(metric.best)}${metric.bestStep === undefined ? '' : ` at step ${metric.bestStep}`}`,
    },
    {
      label: 'Best checkpoint',
      value: summary.bestCheckpointStep === undefined ? '—' : `step ${summary.bestCheckpointStep}`,
    },
    { label: 'Wall time', value: formatWall(summary.wallMs) },
    { label: 'GPU-hours', value: summary.gpuHours.toFixed(2) },
    { label: 'Cost', value: `$${summary.costUsd.toFixed(2)}` },
    ...trackerLinkLines(links),
  ];
  const image =
    png === undefined ? undefined : { png, filename: `${meta.name}-model.png`, alt: `${metric.name} chart` };
  return {
    title: `Model ready: ${meta.name}`,
    text: lines.join('\n'),
    fields,
    ...definedOnly({ image }),
    actions: [
      { actionId: `${MODEL_ACTIONS.push}:${meta.id}`, label: 'Push to Hub', style: 'primary' },
      { actionId: `${MODEL_ACTIONS.fork}:${meta.id}`, label: 'Fork' },
      { actionId: `${MODEL_ACTIONS.compare}:${meta.id}`, label: 'Compare' },
    ],
  };
}
