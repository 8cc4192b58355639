import type { Logger } from '../logger.js';
import type { Evaluation } from './evaluate.js';
import type { Incident } from './types.js';

/** What the monitor's shell does with an evaluation besides committing it: the outbox it reads back, the logs. */

/** Undelivered incidents kept per run; an adapter down for long drops the oldest beyond this. */
export const MAX_OUTBOX = 50;

/** The outbox hash's entries as incidents, oldest first; a corrupt entry is dropped. */
export function parseOutbox(raw: Record<string, string>): Incident[] {
  const incidents: Incident[] = [];
  for (const value of Object.values(raw)) {
    try {
      const incident = JSON.parse(value) as Incident;
      if (typeof incident.id === 'string' && typeof incident.kind === 'string') incidents.push(incident);
    } catch {
      // a corrupt entry is dropped rather than blocking delivery of the others
    }
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
