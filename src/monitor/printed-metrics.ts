import { definedOnly } from '../defined-only.js';
import type { Logger } from '../logger.js';
import { appendDerived, formatDerivedLine } from '../runs/derived-file.js';
import { parseMetricLine } from '../runs/metric-line.js';
import { createStdoutParser, type StdoutParser } from '../runs/stdout-metrics/stdout-parser.js';
import type { EventPoint } from '../runs/tfevents/event-files.js';
import type { MonitorState } from './monitor-state.js';
import { addPoint, createRollingState, type RollingLimits } from './rolling-stats.js';

/**
 * The monitor's two metric sources. The helper's metrics.jsonl is exact; when a run never writes it, the
 * points come from what the run prints (output.log), parsed by src/runs/stdout-metrics. Both feed the same
 * detectors, rolling windows and charts. Once metrics.jsonl has any line the helper wins: output.log is no
 * longer parsed, and points already taken from it are dropped, so nothing is counted twice.
 */

interface IncomingPoint {
  line: string;
  parsed: ReturnType<typeof parseMetricLine>;
  source: MetricsSource;
}

type MetricsSource = 'helper' | 'events' | 'stdout';

export function createPrintedMetricsReader(options: { pattern?: RegExp; logger?: Logger }) {
  const parser: StdoutParser = createStdoutParser(definedOnly({ pattern: options.pattern }));

  /**
   * Once the run's event files give a point, they are the source: points taken from output.log so far are
   * dropped (as for the helper) and the derived file is written again from the event points. Returns
   * undefined while they gave none.
   */
  function collectEvents(
    runId: string,
    state: MonitorState,
    eventPoints: readonly EventPoint[],
    points: IncomingPoint[],
  ): { points: IncomingPoint[]; derivedText?: string } | undefined {
    const printed = state.printed;
    if (printed === undefined || (printed.events !== true && eventPoints.length === 0)) return undefined;
    let rewrite = false;
    if (printed.events !== true) {
      printed.events = true;
      printed.derivedBytes = 0;
      printed.counted = 0;
      rewrite = true;
      if (state.rolling.points > 0) {
        state.rolling = createRollingState();
        delete state.extras;
        options.logger?.info(
          { runId },
          'the run writes event files (TensorBoard or MLflow): their points replace those read from output.log',
        );
      }
    }
    let text = '';
    for (const point of eventPoints) {
      text += formatDerivedLine(point.step, point.metrics, point.source ?? 'tfevents');
      const parsed = { step: point.step, metrics: point.metrics };
      points.push({ line: '', parsed: { ok: true, point: parsed }, source: 'events' });
    }
    printed.counted += eventPoints.length;
    return definedOnly({ points, derivedText: text !== '' || rewrite ? text : undefined });
  }

  return {
    /**
     * All points of this tick in order: the helper's lines (parsed, malformed ones included so the caller
     * can report them), then the points read from the new output.log lines unless the helper is in use.
     */
    collect(input: {
      runId: string;
      state: MonitorState;
      helperLines: readonly string[];
      logLines: readonly string[];
      logReset: boolean;
      /** Points new in the run's TensorBoard event files (precedence: helper, event files, output.log). */
      eventPoints?: readonly EventPoint[];
    }): { points: IncomingPoint[]; progressStep?: number; derivedText?: string } {
      const { state } = input;
      const points: IncomingPoint[] = [];
      for (const line of input.helperLines) {
        if (line.trim() === '') continue;
        points.push({ line, parsed: parseMetricLine(line), source: 'helper' });
      }
      // A state saved before this reader existed holds only the helper's points: the helper is in use.
      state.printed ??= { lines: 0, helper: state.rolling.points > 0, counted: 0, derivedBytes: 0 };
      const printed = state.printed;
      if (!printed.helper && points.length > 0) {
        printed.helper = true;
        // Whatever the rolling state holds so far came from output.log (points or bar progress).
        if (state.rolling.points > 0) {
          state.rolling = createRollingState();
          delete state.extras;
          options.logger?.info(
            { runId: input.runId, dropped: printed.counted },
            'the run writes metrics.jsonl: its points replace those read from output.log',
          );
        }
      }
      if (printed.helper) return { points };
      const fromEvents = collectEvents(input.runId, state, input.eventPoints ?? [], points);
      if (fromEvents !== undefined) return fromEvents;

      let rewrite = false;
      if (input.logReset) {
        // output.log was replaced: its steps start over.
        state.printed = { lines: 0, helper: false, counted: 0, derivedBytes: 0 };
        if (state.rolling.points > 0) {
          state.rolling = createRollingState();
          delete state.extras;
        }
        rewrite = true;
      }
      const current = state.printed;
      const result = parser.parseLines(input.logLines, current);
      let text = '';
      for (const point of result.points) {
        text += formatDerivedLine(point.step, point.metrics);
        points.push({
          line: '',
          parsed: { ok: true, point: { step: point.step, metrics: point.metrics } },
          source: 'stdout',
        });
      }
      current.counted += result.points.length;
      return definedOnly({
        points,
        progressStep: result.progressStep,
        // The caller appends it with `writeDerived` (the reader does no I/O).
        derivedText: text !== '' || rewrite ? text : undefined,
      });
    },

    /** Appends this tick's derived lines (`collect().derivedText`) to the run's derived metrics file. */
    async writeDerived(state: MonitorState, runDir: string, text: string | undefined): Promise<void> {
      if (text === undefined || state.printed === undefined) return;
      state.printed.derivedBytes = await appendDerived(runDir, state.printed.derivedBytes, text);
    },

    /** The training bar moved without a metric line: record the step so `status` and stall see progress. */
    applyProgress(state: MonitorState, step: number | undefined, now: number, limits: RollingLimits): void {
      if (step === undefined || state.printed?.helper === true) return;
      if (state.rolling.lastStep !== undefined && step <= state.rolling.lastStep) return;
      addPoint(state.rolling, { step, metrics: {} }, now, limits);
    },
  };
}

/** Where a run's metrics come from, for `status` and triage. */
export function metricsSourceOf(state: MonitorState): MetricsSource | undefined {
  if (state.printed === undefined) return undefined;
  if (state.printed.helper) return 'helper';
  if (state.printed.events === true) return 'events';
  return state.printed.counted > 0 ? 'stdout' : undefined;
}

/**
 * The planned number of steps a print-only run's training bar shows (tqdm's total), for the plateau
 * detector. Not once the bar has restarted: then its total was one epoch's, not the run's.
 */
export function plannedStepsOf(state: MonitorState): number | undefined {
  const printed = state.printed;
  if (printed === undefined || printed.helper || printed.bar?.used !== true || printed.bar.offset > 0)
    return undefined;
  return printed.plannedSteps;
}
