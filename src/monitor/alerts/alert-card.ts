import { z } from 'zod';
import type { Card } from '../../bot/chat-adapter.js';
import { definedOnly } from '../../defined-only.js';
import { trackerLinkLines } from '../../runs/tracker-links.js';
import { codeBlock } from '../../text/code-block.js';
import type { Incident } from '../types.js';

/** The alert card: what is stored for it, its buttons, and the card before and after a decision. */

/** The card's buttons (`ack:<alertId>`, `stop:<alertId>`, `fix:<alertId>`); the action router keys on these. */
export const ALERT_ACTIONS = { ack: 'ack', stop: 'stop', fix: 'fix' } as const;
export type AlertVerb = keyof typeof ALERT_ACTIONS;

export const alertSchema = z.object({
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
  /** A stall's hang dump (every thread's stack), for triage. */
  stackDump: z.string().optional(),
  crashClass: z.string().optional(),
  step: z.number().optional(),
  launch: z.number().optional(),
  /** Where a NaN, divergence or spike began (the fix resumes from a checkpoint before it). */
  firstBadStep: z.number().optional(),
  cardMessageId: z.string().optional(),
  createdAt: z.number(),
});
export type Alert = z.infer<typeof alertSchema>;

/** The first click on an alert card. */
export const alertDecisionSchema = z.object({
  verb: z.enum(['ack', 'stop', 'fix']),
  user: z.object({ id: z.string(), name: z.string() }),
  at: z.number(),
});
export type AlertDecision = z.infer<typeof alertDecisionSchema>;

interface AlertCardInput {
  alert: Alert;
  incident: Incident;
  png: Uint8Array | undefined;
  /** The last checkpoint: where a restart or a fix would continue from. */
  checkpointStep: number | undefined;
  /** Shepherd does not own a watched run's script: no fix, no relaunch. */
  watched: boolean;
}

export function alertCard(input: AlertCardInput): Card {
  const { alert, incident, png, checkpointStep, watched } = input;
  const lines = [alert.summary];
  if (incident.traceback !== undefined) lines.push(codeBlock(incident.traceback));
  if (watched) lines.push('Watched run: Shepherd did not launch it, so it offers no fix or relaunch.');
  const actions: Card['actions'] = [];
  // Info notes (a plateau, the finish summary) carry a chart and a suggestion, never buttons.
  if (incident.severity !== 'info') {
    actions.push({ actionId: `${ALERT_ACTIONS.ack}:${alert.id}`, label: 'Acknowledge' });
    // A crash or a failed evaluation has no process left to stop.
    if (incident.kind !== 'crash' && incident.kind !== 'eval_failed')
      actions.push({ actionId: `${ALERT_ACTIONS.stop}:${alert.id}`, label: 'Stop run', style: 'danger' });
    if (!watched)
      actions.push({
        actionId: `${ALERT_ACTIONS.fix}:${alert.id}`,
        label: 'Ask Shepherd to fix',
        style: 'primary',
      });
  }
  const fields = [{ label: 'Run', value: alert.runName }];
  if (incident.step !== undefined) fields.push({ label: 'Step', value: String(incident.step) });
  if (incident.crashClass !== undefined) fields.push({ label: 'Class', value: incident.crashClass });
  for (const link of trackerLinkLines(incident.links)) fields.push(link);
  if (checkpointStep !== undefined && incident.severity !== 'info') {
    fields.push({ label: 'Last checkpoint', value: `step ${checkpointStep}` });
  }
  const image =
    png === undefined
      ? undefined
      : { png, filename: `${alert.runName}-${incident.kind}.png`, alt: `${alert.metrics.join(', ')} chart` };
  return {
    title: incident.title,
    text: lines.join('\n'),
    fields,
    ...definedOnly({ image }),
    ...(actions.length === 0 ? {} : { actions }),
  };
}

/** The card after a click: title, summary and run, the buttons replaced by the outcome. */
export function resolvedAlertCard(alert: Alert, outcome: string): Card {
  return {
    title: alert.title,
    text: alert.summary,
    fields: [{ label: 'Run', value: alert.runName }],
    resolved: outcome,
  };
}

/** The stored alert as the incident triage is told about. */
export function incidentOfAlert(alert: Alert): Incident {
  return {
    id: alert.id,
    runId: alert.runId,
    kind: alert.kind as Incident['kind'],
    severity: 'warning',
    title: alert.title,
    summary: alert.summary,
    metrics: alert.metrics,
    at: alert.createdAt,
    ...definedOnly({ traceback: alert.traceback, stackDump: alert.stackDump }),
    ...(alert.crashClass === undefined
      ? {}
      : { crashClass: alert.crashClass as NonNullable<Incident['crashClass']> }),
    ...definedOnly({ step: alert.step }),
  };
}
