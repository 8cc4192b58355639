import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { LlmProvider } from '../agent/llm-provider.js';
import type { ActionOutcome, Card, ChatUser, InboundAction } from '../bot/chat-adapter.js';
import type { IdempotentNotifier } from '../bot/notifier.js';
import { codeBlock } from '../code-block.js';
import { definedOnly } from '../defined-only.js';
import { errorMessage, ServiceError } from '../errors.js';
import type { Logger } from '../logger.js';
import { renderChart } from '../notify/charts/render-chart.js';
import { type ControlJob, enqueue, JOBS } from '../queue/jobs.js';
import { redactedHead } from '../redact.js';
import { type CheckpointHistory, kindLabel } from '../runs/checkpoint-history.js';
import { type RunAccess, RunAccessError } from '../runs/run-access.js';
import type { RunOperations } from '../runs/run-operations.js';
import type { RunService } from '../runs/run-service.js';
import type { RunMeta } from '../runs/run-types.js';
import type { RunsFacade } from '../runs/runs-facade.js';
import type { Monitor } from './monitor.js';
import { checkPythonSyntax, triage } from './triage.js';
import type { Incident } from './types.js';

/**
 * Turns monitor incidents into alert cards (with a chart and Acknowledge / Stop run / Ask Shepherd to fix),
 * and runs LLM triage — only for an incident or when a person asks — whose FIX goes through the same
 * script-change approval as a person's change, capped at `maxAutofix` per run (counted in Redis).
 */

const alertSchema = z.object({
  schemaVersion: z.literal(1),
  id: z.string(),
  runId: z.string(),
  runName: z.string(),
  threadId: z.string(),
  kind: z.string(),
  title: z.string(),
  summary: z.string(),
  metrics: z.array(z.string()),
  traceback: z.string().optional(),
  crashClass: z.string().optional(),
  step: z.number().optional(),
  launch: z.number().optional(),
  /** Where a NaN, divergence or spike began (the fix resumes from a checkpoint before it). */
  firstBadStep: z.number().optional(),
  cardMessageId: z.string().optional(),
  createdAt: z.number(),
});
type Alert = z.infer<typeof alertSchema>;

/** Incidents that are triaged by the LLM without anyone asking. */
const AUTO_TRIAGE: ReadonlySet<Incident['kind']> = new Set(['crash', 'nan', 'divergence']);
const KEEP_SECONDS = 30 * 24 * 3600;
/** Longer than a slow delivery (a chart render plus a post waited out through its retries). */
const CLAIM_MS = 5 * 60_000;
const SHEPHERD: ChatUser = { id: 'shepherd', name: 'Shepherd' };

export interface AlertServiceOptions {
  redis: Redis;
  prefix: string;
  monitor: Monitor;
  runs: RunService;
  facade: RunsFacade;
  operations: RunOperations;
  notifier: IdempotentNotifier;
  provider: LlmProvider;
  controlQueue: Queue;
  quickchartUrl: string;
  maxAutofix: number;
  python: string;
  /** Environment for the syntax check (the same one training processes get). */
  environment: Readonly<Record<string, string | undefined>>;
  /** Who may press Stop and Fix (Acknowledge is open to everyone who sees the card). */
  access?: RunAccess;
  /** Told of every alert card posted (follows of `alert` / `stalled`); must not throw. */
  onAlert?: (meta: RunMeta, incident: Incident) => Promise<void>;
  /** Checkpoint history: where a fix for a NaN, divergence or spike resumes from. */
  checkpoints?: CheckpointHistory;
  logger: Logger;
}

/** Incidents whose fix must not resume from a checkpoint saved on already-broken weights. */
const WEIGHT_INCIDENTS: ReadonlySet<string> = new Set(['nan', 'divergence', 'spike']);

export function createAlertService(options: AlertServiceOptions) {
  const { redis, prefix, notifier, logger } = options;
  const alertKey = (id: string) => `${prefix}:alert:${id}`;
  const decisionKey = (id: string) => `${prefix}:alert-decision:${id}`;
  const autofixKey = (runId: string) => `${prefix}:autofix:${runId}`;
  const claimKey = (id: string) => `${prefix}:alert-claim:${id}`;

  async function loadAlert(id: string): Promise<Alert | undefined> {
    const raw = await redis.get(alertKey(id));
    if (raw === null) return undefined;
    try {
      const parsed = alertSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }

  async function chartFor(runName: string, runId: string, metrics: string[], highlight?: [number, number]) {
    if (metrics.length === 0) return undefined;
    try {
      const series = await options.monitor.series(runId, metrics);
      if (Object.values(series).every((points) => points.length === 0)) return undefined;
      return await renderChart(
        { runName, series, ...definedOnly({ highlightSteps: highlight }) },
        { quickchartUrl: options.quickchartUrl },
      );
    } catch (error) {
      logger.warn({ runId, err: errorMessage(error) }, 'could not render an alert chart; posting without it');
      return undefined;
    }
  }

  function alertCard(
    alert: Alert,
    incident: Incident,
    png: Uint8Array | undefined,
    checkpointStep: number | undefined,
    watched = false,
  ): Card {
    const lines = [alert.summary];
    if (incident.traceback !== undefined) lines.push(codeBlock(incident.traceback));
    // Shepherd does not own a watched run's script: no fix, no relaunch.
    if (watched) lines.push('Watched run: Shepherd did not launch it, so it offers no fix or relaunch.');
    const actions: Card['actions'] = [];
    // Info notes (a plateau, the finish summary) carry a chart and a suggestion, never buttons.
    if (incident.severity !== 'info') {
      actions.push({ actionId: `ack:${alert.id}`, label: 'Acknowledge' });
      if (incident.kind !== 'crash')
        actions.push({ actionId: `stop:${alert.id}`, label: 'Stop run', style: 'danger' });
      if (!watched)
        actions.push({ actionId: `fix:${alert.id}`, label: 'Ask Shepherd to fix', style: 'primary' });
    }
    const fields = [{ label: 'Run', value: alert.runName }];
    if (incident.step !== undefined) fields.push({ label: 'Step', value: String(incident.step) });
    if (incident.crashClass !== undefined) fields.push({ label: 'Class', value: incident.crashClass });
    // Where a restart or a fix would continue from.
    if (checkpointStep !== undefined && incident.severity !== 'info') {
      fields.push({ label: 'Last checkpoint', value: `step ${checkpointStep}` });
    }
    return {
      title: incident.title,
      text: lines.join('\n'),
      fields,
      ...(png === undefined
        ? {}
        : {
            image: {
              png,
              filename: `${alert.runName}-${incident.kind}.png`,
              alt: `${alert.metrics.join(', ')} chart`,
            },
          }),
      ...(actions.length === 0 ? {} : { actions }),
    };
  }

  /**
   * Posts one alert card for an incident. The monitor re-delivers an incident until it is acknowledged, so
   * two ticks (or a tick after a restart) may hand over the same one: a SET NX claim on the alert id lets
   * one delivery at a time through and is held until the card id is recorded, and the card itself is a
   * keyed notify job, so a delivery retried after a post that landed (but whose wait failed) reuses that
   * post instead of making a second card.
   */
  async function onIncident(incident: Incident, meta: RunMeta): Promise<void> {
    const id = `al_${incident.id.replace(/[^\w-]/g, '').slice(-40)}`;
    const existing = await loadAlert(id);
    if (existing?.cardMessageId !== undefined) return;
    const token = `${process.pid}-${Math.random().toString(36).slice(2)}`;
    const claimed = await redis.set(claimKey(id), token, 'PX', CLAIM_MS, 'NX');
    if (claimed !== 'OK')
      throw new ServiceError('delivery_in_progress', `alert ${id} is being delivered`, { retryable: true });
    try {
      // Checked again under the claim: a delivery that finished between the first read and the claim.
      if ((await loadAlert(id))?.cardMessageId !== undefined) return;
      await deliver(id, incident, meta);
    } finally {
      // Released only by its owner; a retry is safe because the card post is keyed by the alert id.
      await redis.eval(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        1,
        claimKey(id),
        token,
      );
    }
  }

  async function deliver(id: string, original: Incident, meta: RunMeta): Promise<void> {
    const incident = await afterFix(original, meta);
    const launch = incident.launch ?? meta.launchCount;
    const firstBadStep = incident.highlightSteps?.[0] ?? incident.step;
    if (WEIGHT_INCIDENTS.has(incident.kind) && firstBadStep !== undefined) {
      await options.checkpoints?.noteIncident(meta.id, { launch, kind: incident.kind, firstBadStep });
    }
    const alert: Alert = {
      schemaVersion: 1,
      id,
      runId: meta.id,
      runName: meta.name,
      threadId: meta.threadId,
      kind: incident.kind,
      title: incident.title,
      summary: incident.summary,
      metrics: incident.metrics,
      ...definedOnly({
        traceback: incident.traceback,
        crashClass: incident.crashClass,
        step: incident.step,
        firstBadStep,
      }),
      launch,
      createdAt: Date.now(),
    };
    const png = await chartFor(meta.name, meta.id, incident.metrics, incident.highlightSteps);
    const checkpoint = await options.runs
      .status(meta.id)
      .then((report) => report.resume?.step ?? undefined)
      .catch(() => undefined);
    const watched = meta.watch !== undefined;
    const posted = await notifier.postCardOnce(
      `alert-card:${prefix}:${id}`,
      meta.threadId,
      alertCard(alert, incident, png, checkpoint, watched),
    );
    await redis.set(
      alertKey(id),
      JSON.stringify({ ...alert, cardMessageId: posted.messageId }),
      'EX',
      KEEP_SECONDS,
    );
    await options.onAlert?.(meta, incident);
    if (AUTO_TRIAGE.has(incident.kind) && !watched) {
      await enqueueAction(
        {
          v: 1,
          kind: 'alert-action',
          alertId: id,
          action: 'fix',
          user: SHEPHERD,
          threadId: meta.threadId,
          messageId: posted.messageId,
        },
        `triage-${id}`,
      );
    }
  }

  /** In the launch that follows an approved fix, say so: "still NaN after fix 1 of 3". */
  async function afterFix(incident: Incident, meta: RunMeta): Promise<Incident> {
    if (incident.kind === 'finished' || options.checkpoints === undefined) return incident;
    const fix = await options.checkpoints.fixLaunch(meta.id);
    if (fix === undefined || fix.launch !== (incident.launch ?? meta.launchCount)) return incident;
    const after = `after fix ${fix.fix} of ${fix.maxFixes}`;
    const label =
      fix.kind === incident.kind
        ? `still ${kindLabel(incident.kind)} ${after}`
        : `${kindLabel(incident.kind)} ${after}`;
    return { ...incident, summary: `${label}: ${incident.summary}` };
  }

  async function enqueueAction(
    job: Extract<ControlJob, { kind: 'alert-action' }>,
    jobId: string,
  ): Promise<void> {
    await enqueue(options.controlQueue, JOBS.alertAction, job, { jobId });
  }

  /** Button handler for `ack:`, `stop:` and `fix:`; the first click on an alert decides it. */
  async function onAction(
    action: InboundAction,
    verb: 'ack' | 'stop' | 'fix',
    alertId: string,
  ): Promise<ActionOutcome> {
    const alert = await loadAlert(alertId);
    if (alert === undefined) return { status: 'unknown', message: 'this alert no longer exists' };
    if (verb !== 'ack' && options.access !== undefined) {
      // Checked before the click is recorded, so a refused click leaves the card for someone allowed.
      try {
        const meta = await options.runs.findRun(alert.runId);
        await options.access.authorize(
          meta,
          action.user,
          action.threadId,
          verb === 'stop' ? 'stop' : 'fix',
          'button',
        );
      } catch (error) {
        if (error instanceof RunAccessError) return { status: 'forbidden', message: error.message };
        throw error;
      }
    }
    const record = JSON.stringify({ verb, user: action.user, at: Date.now() });
    const won = await redis.set(decisionKey(alertId), record, 'EX', KEEP_SECONDS, 'NX');
    if (won !== 'OK') {
      const previous = await redis.get(decisionKey(alertId));
      const who =
        previous === null
          ? 'someone'
          : ((JSON.parse(previous) as { user?: ChatUser }).user?.name ?? 'someone');
      return { status: 'resolved', message: `this alert was already handled by ${who}` };
    }
    await enqueueAction(
      {
        v: 1,
        kind: 'alert-action',
        alertId,
        action: verb,
        user: action.user,
        threadId: alert.threadId,
        messageId: action.messageId,
      },
      `alert-${verb}-${alertId}`,
    );
    return { status: 'accepted' };
  }

  async function resolveCard(alert: Alert, outcome: string): Promise<void> {
    if (alert.cardMessageId === undefined) return;
    const card: Card = {
      title: alert.title,
      text: alert.summary,
      fields: [{ label: 'Run', value: alert.runName }],
      resolved: outcome,
    };
    await notifier.updateCard(alert.threadId, alert.cardMessageId, card);
  }

  /** Control job: applies an alert button, or runs triage (automatic or asked for). */
  async function apply(job: Extract<ControlJob, { kind: 'alert-action' }>): Promise<void> {
    const alert = await loadAlert(job.alertId);
    if (alert === undefined) return;
    const clock = new Date().toISOString().slice(11, 16);
    if (job.action === 'ack') {
      await resolveCard(alert, `Acknowledged by ${job.user.name} at ${clock} UTC`);
      return;
    }
    if (job.action === 'stop') {
      try {
        await options.runs.stop(alert.runId, job.user, `stopped from an alert (${alert.kind})`);
        await resolveCard(alert, `Run stopped by ${job.user.name} at ${clock} UTC`);
      } catch (error) {
        await resolveCard(
          alert,
          `Stop requested by ${job.user.name} at ${clock} UTC: ${errorMessage(error)}`,
        );
      }
      return;
    }
    if (job.user.id !== SHEPHERD.id)
      await resolveCard(alert, `${job.user.name} asked Shepherd to fix this at ${clock} UTC`);
    await runTriage(alert, job.user);
  }

  async function runTriage(alert: Alert, askedBy: ChatUser): Promise<void> {
    const meta = await options.runs.findRun(alert.runId);
    const used = Number((await redis.get(autofixKey(meta.id))) ?? 0);
    if (used >= options.maxAutofix) {
      await notifier.post(
        alert.threadId,
        `${meta.name}: Shepherd has already proposed ${used} fixes for this run (the limit is ${options.maxAutofix}); a person must look at it now.`,
      );
      return;
    }
    const processState = (await options.facade.processState(meta)) ?? { kind: 'unknown' as const };
    const script = await options.facade.readScript(meta.id).catch(() => undefined);
    const incident: Incident = {
      id: alert.id,
      runId: meta.id,
      kind: alert.kind as Incident['kind'],
      severity: 'warning',
      title: alert.title,
      summary: alert.summary,
      metrics: alert.metrics,
      at: alert.createdAt,
      ...definedOnly({ traceback: alert.traceback }),
      ...(alert.crashClass === undefined
        ? {}
        : { crashClass: alert.crashClass as NonNullable<Incident['crashClass']> }),
      ...definedOnly({ step: alert.step }),
    };
    // Triage is told which detector fired and what it saw.
    const snapshot = await options.monitor.snapshot({
      meta,
      processState,
      incident,
      ...definedOnly({ script }),
    });
    let result: Awaited<ReturnType<typeof triage>>;
    try {
      result = await triage({
        snapshot,
        reason: `triage:${alert.kind}`,
        ask: async (prompt) => {
          const response = await options.provider.complete({
            system:
              'You are Shepherd, an ML training run doctor. Answer only with the JSON object asked for.',
            messages: [{ role: 'user', author: askedBy.name, content: prompt }],
            tools: [],
            reason: `triage:${alert.kind}`,
          });
          return response.text;
        },
      });
    } catch (error) {
      await notifier.post(
        alert.threadId,
        `${meta.name}: I could not reach the model to triage this (${errorMessage(error)}). Plain commands still work.`,
      );
      return;
    }
    if (result.decision !== 'FIX') {
      const label = result.decision === 'LGTM' ? 'looks fine' : 'needs attention';
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name} (${alert.kind}): ${label} — ${result.diagnosis}`,
      );
      return;
    }
    if (snapshot.scriptComplete === false) {
      // The model saw a cut or redacted script: its "complete new train.py" would lose the rest.
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name} (${alert.kind}): needs attention — ${result.diagnosis}\nI am not proposing a script change: train.py is too long or holds secrets, so I only saw part of it. A person should make this change.`,
      );
      return;
    }
    const syntax = await checkPythonSyntax(result.script, options.python, options.environment);
    if (!syntax.ok) {
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name}: ${result.diagnosis}\nThe proposed script does not compile, so I am not proposing it:\n${codeBlock(redactedHead(syntax.error, 800))}`,
      );
      return;
    }
    // Counted before the card goes out so a restart or a retry can never exceed the cap.
    const count = await redis.incr(autofixKey(meta.id));
    if (count > options.maxAutofix) {
      await notifier.post(
        alert.threadId,
        `${meta.name}: the limit of ${options.maxAutofix} automatic fixes is reached; a person must look at it now.`,
      );
      return;
    }
    // A fix for broken weights resumes from the last healthy checkpoint before the first bad step.
    const resume =
      WEIGHT_INCIDENTS.has(alert.kind) &&
      alert.firstBadStep !== undefined &&
      options.checkpoints !== undefined
        ? await options.checkpoints.chooseResumePoint(meta.id, {
            launch: alert.launch ?? meta.launchCount,
            kind: alert.kind,
            firstBadStep: alert.firstBadStep,
          })
        : undefined;
    try {
      await options.checkpoints?.pinFix(meta.id, {
        script: result.script,
        fix: count,
        maxFixes: options.maxAutofix,
        kind: alert.kind,
        ...definedOnly({ resume }),
      });
      const proposal = await options.operations.updateScript(
        meta.id,
        result.script,
        resume === undefined ? result.diagnosis : `${result.diagnosis}\n${resume.text}`,
        SHEPHERD,
        alert.threadId,
        'monitor',
      );
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name}: ${result.diagnosis}\nI proposed a fix (${count} of ${options.maxAutofix}); it needs approval on the card. ${proposal.text}`,
      );
    } catch (error) {
      await notifier.post(
        alert.threadId,
        `Triage of ${meta.name}: ${result.diagnosis}\nThe fix could not be proposed: ${errorMessage(error)}`,
      );
    }
  }

  return {
    onIncident,
    onAction,
    apply,
    autofixCount: async (runId: string) => Number((await redis.get(autofixKey(runId))) ?? 0),
  };
}

export type AlertService = ReturnType<typeof createAlertService>;
