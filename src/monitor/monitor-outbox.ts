import type { Logger } from '../logger.js';
import { parseJsonWith } from '../text/json.js';
import type { Evaluation } from './evaluate.js';
import { incidentSchema } from './incident-schema.js';
import type { Incident } from './types.js';

/** What the monitor's shell does with an evaluation besides committing it: the outbox it reads back, the logs. */

/** Undelivered incidents kept per run; an adapter down for long drops the oldest beyond this. */
export const MAX_OUTBOX = 50;

/**
 * The outbox hash's entries as incidents, oldest first. An entry that is not an incident (corrupt, or
 * written by another version) is skipped and logged, rather than blocking or breaking the others' delivery.
 */
export function parseOutbox(raw: Record<string, string>, logger?: Logger, runId?: string): Incident[] {
  const incidents: Incident[] = [];
  const skipped: string[] = [];
  for (const [field, value] of Object.entries(raw)) {
    const incident = parseJsonWith(incidentSchema, value);
    if (incident === undefined) skipped.push(field);
    else incidents.push(incident);
  }
  if (skipped.length > 0) {
    logger?.warn({ runId, entries: skipped.slice(0, 10) }, 'unreadable monitor outbox entries skipped');
  }
  return incidents.sort((a, b) => a.at - b.at || a.id.localeCompare(b.id));
}

/** The shell logs what the pure evaluation only reports (a restarted file, unreadable lines). */
export function logEvaluation(logger: Logger | undefined, runId: string, evaluation: Evaluation): void {
  if (evaluation.metricsReset) {
    logger?.info({ runId }, 'metrics.jsonl was replaced or truncated; reading it again from the start');
  }
  if (evaluation.scriptAlertsSkipped > 0) {
    logger?.warn(
      { runId, skipped: evaluation.scriptAlertsSkipped },
      'unreadable alerts.jsonl lines skipped (not written by shepherd.alert?)',
    );
  }
  const { malformed } = evaluation;
  if (malformed.count > 0) {
    logger?.warn(
      { runId, malformed: malformed.count, reason: malformed.firstReason },
      'malformed metric lines skipped',
    );
  }
}
