import { describe, expect, it } from 'vitest';
import { normaliseDetector } from '../../src/monitor/alerts/alert-policy.js';
import { readScriptAlerts } from '../../src/monitor/detectors/script-alert.js';
import { evaluate, type NewLines } from '../../src/monitor/evaluate.js';
import { createMonitorState } from '../../src/monitor/monitor-state.js';
import type { AlertPolicy } from '../../src/monitor/policy-checks.js';
import { createPrintedMetricsReader } from '../../src/monitor/printed-metrics.js';
import { DEFAULT_ROLLING_LIMITS } from '../../src/monitor/rolling-stats.js';
import type { TickContext } from '../../src/monitor/tick-context.js';
import { DEFAULT_DETECTOR_CONFIG } from '../../src/monitor/types.js';
import { testRunMeta } from '../helpers/run-meta.js';

/* `shepherd.alert` records (alerts.jsonl) into incidents: levels, repeats, mutes, unreadable lines. */

const record = (fields: Record<string, unknown>) =>
  JSON.stringify({ ts: 1000, title: 'Low accuracy', text: '', level: 'warn', step: 5, wait: 300, ...fields });

describe('script alerts', () => {
  it('maps levels to severities and drops a repeat of a title within its wait, across processes', () => {
    const book = {};
    const { alerts, skipped } = readScriptAlerts(
      [
        record({ text: 'accuracy 0.10 < 0.5' }),
        // Rank 1 of the same job: the helper of another process could not know.
        record({ ts: 1001, text: 'accuracy 0.11 < 0.5' }),
        record({ ts: 1002, title: 'Data loader slow', level: 'info', step: null }),
        record({ ts: 1400, level: 'error', step: 90 }),
        'not json',
        '{"ts": 1, "title": ""}',
      ],
      book,
      'gpt',
      ['loss'],
    );
    expect(skipped).toBe(2);
    expect(alerts.map((alert) => [alert.title, alert.severity, alert.fields.summary])).toEqual([
      ['Low accuracy', 'warning', 'Warning from the script at step 5: accuracy 0.10 < 0.5'],
      ['Data loader slow', 'info', 'Note from the script.'],
      ['Low accuracy', 'critical', 'Error from the script at step 90.'],
    ]);
    expect(alerts[0]?.fields).toMatchObject({ title: 'gpt: Low accuracy', metrics: ['loss'], step: 5 });
  });

  it('redacts secrets a script puts in its alert text', () => {
    const { alerts } = readScriptAlerts(
      [record({ text: 'token hf_abcdefghijklmnopqrstuvwxyz0123456789 expired' })],
      {},
      'gpt',
      [],
    );
    expect(alerts[0]?.fields.summary).not.toContain('hf_abcdefghijklmnopqrstuvwxyz0123456789');
  });

  it('raises one incident per alert with its own id, charted with the loss, and is silent when muted', () => {
    const meta = testRunMeta('r1', { name: 'gpt' });
    const context = (policy?: AlertPolicy): TickContext => ({
      meta,
      detectors: DEFAULT_DETECTOR_CONFIG,
      limits: DEFAULT_ROLLING_LIMITS,
      printedMetrics: createPrintedMetricsReader({}),
      ...(policy === undefined ? {} : { policy }),
    });
    const lines = (...values: string[]): NewLines => ({ lines: values, reset: false, more: false });
    const state = createMonitorState();
    const first = evaluate(state, lines('{"step": 5, "loss": 1.5}'), lines(), { kind: 'alive' }, 1, {
      ...context(),
      scriptAlertLines: [record({})],
    });
    expect(first.incidents.map((incident) => [incident.kind, incident.severity, incident.metrics])).toEqual([
      ['script_alert', 'warning', ['loss']],
    ]);
    const second = evaluate(state, lines(), lines(), { kind: 'alive' }, 2, {
      ...context(),
      scriptAlertLines: [record({ ts: 2000 })],
    });
    expect(second.incidents).toHaveLength(1);
    expect(second.incidents[0]?.id).not.toBe(first.incidents[0]?.id);

    const muted: AlertPolicy = {
      rules: [],
      mutes: [{ detector: 'script_alert', by: { id: 'u', name: 'u' }, at: '' }],
    };
    const silent = evaluate(state, lines(), lines(), { kind: 'alive' }, 3, {
      ...context(muted),
      scriptAlertLines: [record({ ts: 3000 })],
    });
    expect(silent.incidents).toEqual([]);
    expect(normaliseDetector('script')).toBe('script_alert');
  });
});
