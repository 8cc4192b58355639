import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from '../../agent/llm-provider.js';
import type { ActionOutcome, InboundAction } from '../../bot/chat-adapter.js';
import type { IdempotentNotifier } from '../../bot/notifier.js';
import { renderChart } from '../../charts/render-chart.js';
import { createDecisionStore, type DecisionStore } from '../../decisions/decision-store.js';
import { definedOnly } from '../../defined-only.js';
import { DecisionRecordError, errorMessage, ServiceError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { type ControlJob, enqueue, JOBS } from '../../queue/jobs.js';
import { createLeases } from '../../redis/lease.js';
import { kindLabel } from '../../runs/checkpoints/checkpoint-entries.js';
import type { CheckpointHistory } from '../../runs/checkpoints/checkpoint-history.js';
import type { RunService } from '../../runs/lifecycle/run-service.js';
import type { RunOperations } from '../../runs/operations/operation-types.js';
import type { RunAccess } from '../../runs/operations/run-access.js';
import type { RunMeta } from '../../runs/records/run-types.js';
import type { RunQueries } from '../../runs/run-queries.js';
import type { IncidentSink, Monitor } from '../monitor-types.js';
import type { Incident } from '../types.js';
import {
  type Alert,
  type AlertDecision,
  type AlertVerb,
  alertCard,
  alertDecisionSchema,
  alertSchema,
  resolvedAlertCard,
} from './alert-card.js';
import { createAlertTriage, SHEPHERD, WEIGHT_INCIDENTS } from './alert-triage.js';

/**
 * Turns monitor incidents into alert cards (with a chart and Acknowledge / Stop run / Ask Shepherd to fix),
 * and runs LLM triage (alert-triage.ts) — only for an incident or when a person asks. An alert card is a
 * decision card (decisions/decision-store.ts): the first click wins and a control job applies it.
 */

/** Incidents that are triaged by the LLM without anyone asking. */
const AUTO_TRIAGE: ReadonlySet<Incident['kind']> = new Set(['crash', 'nan', 'divergence']);
/** Longer than a slow delivery (a chart render plus a post waited out through its retries). */
const CLAIM_MS = 5 * 60_000;

type AlertActionJob = Extract<ControlJob, { kind: 'alert-action' }>;

export interface AlertService extends IncidentSink {
  /**
   * Posts one alert card for an incident (at most one, however often the monitor re-delivers it). True only
   * for the call that recorded the alert, so a counter moves once per alert, not once per delivery attempt.
   */
  onIncident(incident: Incident, meta: RunMeta): Promise<boolean>;
  /** Button handler for `ALERT_ACTIONS` (`ack:`, `stop:`, `fix:`); the first click on an alert decides it. */
  onAction(action: InboundAction, verb: AlertVerb, alertId: string): Promise<ActionOutcome>;
  /** Control job: applies an alert button, or runs triage (automatic or asked for). */
  apply(job: AlertActionJob): Promise<void>;
}

interface AlertServiceOptions {
  redis: Redis;
  prefix: string;
  monitor: Monitor;
  runs: RunService;
  queries: RunQueries;
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

export function createAlertService(options: AlertServiceOptions): AlertService {
  const { redis, prefix, notifier, logger } = options;
  const claimKey = (id: string) => `${prefix}:alert-claim:${id}`;
  const leases = createLeases(redis);
  // Keys `<prefix>:alert:<id>` and `<prefix>:alert-decision:<id>`, as before the primitive.
  const alerts: DecisionStore<Alert, AlertDecision> = createDecisionStore(
    { name: 'alert', subject: alertSchema, decision: alertDecisionSchema },
    {
      redis,
      prefix,
      notifier,
      onInvalid: (error) => logger.warn({ key: error.key, err: error }, 'unreadable alert record'),
    },
  );
  const triage = createAlertTriage(options);

  /** The stored alert; an unreadable one counts as absent, so the next delivery writes it anew. */
  async function deliveredAlert(id: string): Promise<Alert | undefined> {
    return alerts.get(id).catch((error: unknown) => {
      if (error instanceof DecisionRecordError) return undefined;
      throw error;
    });
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
      logger.warn({ runId, err: error }, 'could not render an alert chart; posting without it');
      return undefined;
    }
  }

  /**
   * Posts one alert card for an incident. The monitor re-delivers an incident until it is acknowledged, so
   * two ticks (or a tick after a restart) may hand over the same one: a lease on the alert id lets
   * one delivery at a time through and is held until the card id is recorded, and the card itself is a
   * keyed notify job, so a delivery retried after a post that landed (but whose wait failed) reuses that
   * post instead of making a second card.
   */
  async function onIncident(incident: Incident, meta: RunMeta): Promise<boolean> {
    const id = `al_${incident.id.replace(/[^\w-]/g, '').slice(-40)}`;
    if ((await deliveredAlert(id))?.cardMessageId !== undefined) return false;
    const claim = await leases.tryAcquire(claimKey(id), CLAIM_MS);
    if (claim === undefined)
      throw new ServiceError('delivery_in_progress', `alert ${id} is being delivered`, { retryable: true });
    try {
      // Checked again under the claim: a delivery that finished between the first read and the claim.
      if ((await deliveredAlert(id))?.cardMessageId !== undefined) return false;
      await deliver(id, incident, meta);
      return true;
    } finally {
      // Released only by its holder; a retry is safe because the card post is keyed by the alert id.
      await claim.release();
    }
  }

  function alertOf(id: string, incident: Incident, meta: RunMeta): Alert {
    return {
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
        stackDump: incident.stackDump,
        crashClass: incident.crashClass,
        step: incident.step,
        firstBadStep: incident.highlightSteps?.[0] ?? incident.step,
      }),
      launch: incident.launch ?? meta.launchCount,
      createdAt: Date.now(),
    };
  }

  async function deliver(id: string, original: Incident, meta: RunMeta): Promise<void> {
    const incident = await afterFix(original, meta);
    const alert = alertOf(id, incident, meta);
    if (WEIGHT_INCIDENTS.has(incident.kind) && alert.firstBadStep !== undefined) {
      await options.checkpoints?.noteIncident(meta.id, {
        launch: alert.launch ?? meta.launchCount,
        kind: incident.kind,
        firstBadStep: alert.firstBadStep,
      });
    }
    const png = await chartFor(meta.name, meta.id, incident.metrics, incident.highlightSteps);
    const checkpointStep = await options.queries
      .status(meta.id)
      .then((report) => report.resume?.step ?? undefined)
      .catch(() => undefined);
    const watched = meta.watch !== undefined;
    const posted = await notifier.postCardOnce(
      `alert-card:${prefix}:${id}`,
      meta.threadId,
      alertCard({ alert, incident, png, checkpointStep, watched }),
    );
    await alerts.save(id, { ...alert, cardMessageId: posted.messageId });
    await options.onAlert?.(meta, incident);
    // An infrastructure failure that outlived its automatic relaunches needs a person, not a code fix.
    if (AUTO_TRIAGE.has(incident.kind) && !watched && incident.retries === undefined) {
      const job: AlertActionJob = {
        v: 1,
        kind: 'alert-action',
        alertId: id,
        action: 'fix',
        user: SHEPHERD,
        threadId: meta.threadId,
        messageId: posted.messageId,
      };
      await enqueue(options.controlQueue, JOBS.alertAction, job, { jobId: `triage-${id}` });
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

  /** Stop and Fix are checked before the click is recorded, so a refused click leaves the card for someone allowed. */
  async function refusal(alert: Alert, action: InboundAction, verb: AlertVerb): Promise<string | undefined> {
    if (verb === 'ack' || options.access === undefined) return undefined;
    const meta = await options.queries.find(alert.runId);
    return options.access.refusal(meta, action.user, action.threadId, verb, 'button');
  }

  async function onAction(action: InboundAction, verb: AlertVerb, alertId: string): Promise<ActionOutcome> {
    return alerts.click(alertId, {
      unknown: 'this alert no longer exists',
      choose: async (alert) => {
        const refused = await refusal(alert, action, verb);
        if (refused !== undefined) return { status: 'forbidden', message: refused };
        return { decision: { verb, user: action.user, at: Date.now() } };
      },
      lost: (winner) => `this alert was already handled by ${winner.user.name}`,
      enqueue: async (alert, decision) => {
        const job: AlertActionJob = {
          v: 1,
          kind: 'alert-action',
          alertId,
          action: decision.verb,
          user: decision.user,
          threadId: alert.threadId,
          messageId: action.messageId,
        };
        await enqueue(options.controlQueue, JOBS.alertAction, job, { jobId: `alert-${verb}-${alertId}` });
      },
    });
  }

  /** A click's effect; the outcome line replaces the card's buttons. */
  async function applyVerb(alert: Alert, decision: AlertDecision): Promise<string> {
    const clock = `${new Date().toISOString().slice(11, 16)} UTC`;
    const who = decision.user.name;
    if (decision.verb === 'ack') return `Acknowledged by ${who} at ${clock}`;
    if (decision.verb === 'fix') return `${who} asked Shepherd to fix this at ${clock}`;
    try {
      await options.runs.stop(alert.runId, decision.user, `stopped from an alert (${alert.kind})`);
      return `Run stopped by ${who} at ${clock}`;
    } catch (error) {
      return `Stop requested by ${who} at ${clock}: ${errorMessage(error)}`;
    }
  }

  async function apply(job: AlertActionJob): Promise<void> {
    if (job.user.id === SHEPHERD.id) {
      // Automatic triage decides nothing: the card keeps its buttons for people.
      const alert = await alerts.get(job.alertId);
      if (alert !== undefined) await triage.run(alert, SHEPHERD);
      return;
    }
    await alerts.settle(job.alertId, {
      effect: applyVerb,
      resolvedCard: (alert, _decision, outcome) => resolvedAlertCard(alert, outcome),
      after: async (alert, decision) => {
        if (decision.verb === 'fix') await triage.run(alert, decision.user);
      },
    });
  }

  return { onIncident, onAction, apply };
}
