import type { ActionOutcome, InboundAction } from '../bot/chat-adapter.js';
import type { IdempotentNotifier } from '../bot/notifier.js';
import { readMetricSeries } from '../charts/metrics-chart.js';
import { renderChart } from '../charts/render-chart.js';
import { definedOnly } from '../defined-only.js';
import { HubPushError } from '../errors.js';
import type { Logger } from '../logger.js';
import { metricsFileOf } from '../runs/derived-file.js';
import { readSavedModel } from '../runs/evaluation-files.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import type { TrackerLinks } from '../runs/tracker-links.js';
import type { HubPushService } from './hub-push-service.js';
import { modelReadyCard } from './model-ready-card.js';
import { type ModelSummary, metricOf, summariseModel } from './model-summary.js';

/**
 * The "model ready" card: posted instead of the finished note when a completed run saved a model, once per
 * incident however often the monitor re-delivers it; and its buttons.
 */

export interface ModelReady {
  summarise(meta: RunMeta): Promise<ModelSummary>;
  /** Posts the card for a finish incident when the run saved a model; true when it did (the incident is taken). */
  onFinished(incident: { id: string; kind: string; links?: TrackerLinks }, meta: RunMeta): Promise<boolean>;
  /** The best healthy checkpoint: the one nearest at or before the best metric step (the Fork form's default). */
  bestHealthyStep(meta: RunMeta): Promise<number | undefined>;
  /** Push to Hub (Fork and Compare are `model-actions.ts`). */
  onPush(action: InboundAction, runId: string): Promise<ActionOutcome>;
}

interface ModelReadyOptions {
  prefix: string;
  notifier: IdempotentNotifier;
  runs: RunQueries;
  checkpointSteps(runId: string): Promise<number[]>;
  /** Steps of checkpoints a fork may start from: not marked bad, still on disk (or pinned). */
  healthyCheckpointSteps(runId: string): Promise<number[]>;
  pushes: HubPushService;
  gpuHourUsd: number;
  quickchartUrl: string;
  logger: Logger;
}

export function createModelReady(options: ModelReadyOptions): ModelReady {
  const { notifier, logger } = options;

  async function seriesOf(meta: RunMeta) {
    const { path } = await metricsFileOf(options.runs.runDirectory(meta.id));
    return readMetricSeries(path, undefined, undefined);
  }

  async function summarise(meta: RunMeta): Promise<ModelSummary> {
    const [series, steps] = await Promise.all([
      seriesOf(meta),
      options.checkpointSteps(meta.id).catch(() => []),
    ]);
    return summariseModel(meta, series, steps, options.gpuHourUsd);
  }

  async function chart(meta: RunMeta, series: Awaited<ReturnType<typeof seriesOf>>) {
    const { name } = metricOf(meta, series);
    const points = series[name];
    if (points === undefined || points.length === 0) return undefined;
    try {
      return await renderChart(
        { runName: meta.name, series: { [name]: points } },
        { quickchartUrl: options.quickchartUrl },
      );
    } catch (error) {
      logger.warn(
        { runId: meta.id, err: error },
        'could not render the model-ready chart; posting without it',
      );
      return undefined;
    }
  }

  async function onFinished(
    incident: { id: string; kind: string; links?: TrackerLinks },
    given: RunMeta,
  ): Promise<boolean> {
    if (incident.kind !== 'finished') return false;
    // The monitor may see the clean exit before the ending is recorded: read the run and its model afresh.
    const meta = await recorded(given);
    if (meta.model === undefined) return false;
    const series = await seriesOf(meta);
    const summary = await summarise(meta);
    const png = await chart(meta, series);
    await notifier.postCardOnce(
      `model-ready:${options.prefix}:${incident.id}`,
      meta.threadId,
      // The finished incident carries the links only while SHEPHERD_TRACKER_LINKS is on.
      modelReadyCard(meta, summary, png, incident.links),
    );
    return true;
  }

  async function recorded(given: RunMeta): Promise<RunMeta> {
    const meta = await options.runs.get(given.id).catch(() => given);
    const model = meta.model ?? (await readSavedModel(options.runs.runDirectory(meta.id)));
    return { ...meta, ...definedOnly({ model, endedAt: meta.endedAt ?? new Date().toISOString() }) };
  }

  async function bestHealthyStep(meta: RunMeta): Promise<number | undefined> {
    const [series, steps] = await Promise.all([seriesOf(meta), options.healthyCheckpointSteps(meta.id)]);
    return summariseModel(meta, series, steps, options.gpuHourUsd).bestCheckpointStep;
  }

  async function onPush(action: InboundAction, runId: string): Promise<ActionOutcome> {
    const meta = await options.runs.get(runId).catch(() => undefined);
    if (meta === undefined) return { status: 'unknown', message: 'this run no longer exists' };
    try {
      const sentence = await options.pushes.request(meta.id, action.user, action.threadId, {});
      return { status: 'accepted', ...definedOnly({ message: sentence }) };
    } catch (error) {
      if (!(error instanceof HubPushError)) throw error;
      // The refusal is for the thread: whoever pressed the button sees why nothing happened.
      await notifier.post(action.threadId, `Push to Hub: ${error.message}`);
      return { status: 'accepted', message: error.message };
    }
  }

  return { summarise, onFinished, bestHealthyStep, onPush };
}
