import { createHash } from 'node:crypto';
import { readScriptAlerts } from './detectors/script-alert.js';
import { observeEpisode } from './episodes.js';
import type { MonitorState } from './monitor-state.js';
import { lossMetricNames, type Raise } from './observe.js';
import type { TickContext } from './tick-context.js';

/**
 * `shepherd.alert` records → incidents, through the same episodes (one incident id per alert) and mutes
 * (`mute <run> script_alert`) as the detectors. Returns how many lines were unreadable.
 */
export function observeScriptAlerts(state: MonitorState, context: TickContext, raise: Raise): number {
  const lines = context.scriptAlertLines ?? [];
  if (lines.length === 0) return 0;
  state.scriptAlerts ??= {};
  const losses = lossMetricNames(state);
  const chartMetrics = (losses.length > 0 ? losses : Object.keys(state.rolling.metrics)).slice(0, 2);
  const { alerts, skipped } = readScriptAlerts(lines, state.scriptAlerts, context.meta.name, chartMetrics);
  for (const alert of alerts) {
    // A short hash, not the title, keys the episode: the alert id keeps the run id whatever the title.
    const key = `script:${createHash('sha256').update(alert.title).digest('hex').slice(0, 12)}`;
    // Each record is its own episode: it begins, is raised, and ends at once, so the next one is new.
    if (observeEpisode(state.episodes, key, true)) raise('script_alert', key, alert.fields, alert.severity);
    observeEpisode(state.episodes, key, false);
  }
  return skipped;
}
