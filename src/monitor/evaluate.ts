import type { ProcessState } from '../runs/executor.js';
import { recordMalformed } from '../runs/metric-line.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { findTrackerLinks } from '../runs/tracker-links.js';
import { redactedTail, redactSecrets } from '../text/redact.js';
import { isCleanFinish } from './detectors/finished.js';
import { episodeCount, isEpisodeActive } from './episodes.js';
import { createMonitorState, LOG_TAIL_CHARS, type MonitorState } from './monitor-state.js';
import {
  type AcceptedPoint,
  lossMetricNames,
  observeEnd,
  observePoint,
  observeTrends,
  type Raise,
} from './observe.js';
import { observeScriptAlerts } from './observe-script-alerts.js';
import { collectDumpLines, observeStall } from './observe-stall.js';
import { isMuted } from './policy-checks.js';
import type { TickContext } from './tick-context.js';
import { createExtrasState, runTickExtras } from './tick-extras.js';
import type { Incident, IncidentKind } from './types.js';

/**
 * One monitor tick as a function of its inputs: the state, the lines new since the last tick, the
 * process state and the clock. No Redis, no files, no clock of its own: the shell (monitor.ts) reads the
 * cursors and files, calls this, and commits what it returns. For speed the state is updated in place and
 * returned (a state is tens of KiB and the shell caches it between ticks); pass a copy to keep the old one.
 */

export interface NewLines {
  lines: readonly string[];
  /** The file was replaced or truncated since the last tick: its history starts over. */
  reset: boolean;
  /** More data waits beyond the per-tick read cap. */
  more: boolean;
  /** Lines skipped for being longer than the read cap. */
  oversized?: number;
}

export interface Evaluation {
  state: MonitorState;
  /** The incidents whose episode began this tick (muted kinds left out). */
  incidents: Incident[];
  newPoints: number;
  malformed: { count: number; firstReason?: string; note?: string };
  /** Lines derived from output.log for the run's derived metrics file (printed-metrics.ts). */
  derivedText?: string;
  /** metrics.jsonl started over: the rolling windows were reset. */
  metricsReset: boolean;
  /** The stall detector wants the run's stacks (a hang dump) before it alerts; the shell asks for them. */
  dumpStacks: boolean;
  /** Unreadable alerts.jsonl lines this tick (the shell logs them). */
  scriptAlertsSkipped: number;
  /** New tracker links were found (`state.links`): the shell writes them for `status`. */
  linksFound: boolean;
}

const SEVERITY: Record<IncidentKind, Incident['severity']> = {
  crash: 'critical',
  nan: 'critical',
  spike: 'warning',
  divergence: 'warning',
  stall: 'warning',
  plateau: 'info',
  finished: 'info',
  overfitting: 'warning',
  throughput: 'warning',
  grad_norm: 'warning',
  idle_gpu: 'warning',
  rule: 'warning',
  eval_failed: 'critical',
  script_alert: 'warning',
};

const ended = (state: ProcessState) => state.kind === 'exited' || state.kind === 'signaled';

/** Whether this tick may raise a crash and so needs output.log's tail (the shell reads it). */
export function needsCrashLog(
  state: MonitorState,
  meta: RunMeta,
  processState: ProcessState,
  metrics: Pick<NewLines, 'more'>,
  log: Pick<NewLines, 'more'>,
): boolean {
  if (!ended(processState) || metrics.more || log.more) return false;
  // A failed evaluation's traceback is in output.log too (the launcher copies the eval output there).
  if (isCleanFinish(processState))
    return (
      meta.evaluation?.status === 'failed' && !isEpisodeActive(state.episodes, `eval:${meta.launchCount}`)
    );
  return !isEpisodeActive(state.episodes, `crash:${meta.launchCount}`);
}

export function evaluate(
  state: MonitorState,
  metrics: NewLines,
  log: NewLines,
  processState: ProcessState,
  now: number,
  context: TickContext,
): Evaluation {
  const runId = context.runId ?? context.meta.id;
  state.ticks++;
  state.firstTickAt ??= now;
  const fresh: Incident[] = [];
  const raise = raiserOf(state, runId, now, context, fresh);

  startOver(state, metrics, log);
  collectDumpLines(state, log.lines);
  const links = context.trackerLinks === true ? findTrackerLinks(log.lines, state.links) : undefined;
  if (links !== undefined) state.links = links;
  const incoming = context.printedMetrics.collect({
    runId,
    state,
    helperLines: metrics.lines,
    logLines: log.lines,
    logReset: log.reset,
    ...(context.eventPoints === undefined ? {} : { eventPoints: context.eventPoints }),
  });
  const { accepted, malformed } = observePoints(
    state,
    incoming.points,
    metrics.oversized ?? 0,
    now,
    context,
    raise,
  );
  context.printedMetrics.applyProgress(state, incoming.progressStep, now, context.limits);

  observeTrends(state, context, raise);
  const dumpStacks = context.woken === true ? false : observeStall(state, processState, now, context, raise);
  observeExtras(state, accepted, processState, metrics.more, now, context, raise);
  const scriptAlertsSkipped = observeScriptAlerts(state, context, raise);
  // The process end only once the metrics are drained, so the summary is final.
  if (ended(processState) && !metrics.more && !log.more) observeEnd(state, processState, now, context, raise);

  const evaluation: Evaluation = {
    state,
    // A muted detector's episodes still run (so unmuting does not replay an old episode); nothing is said.
    incidents: fresh.filter((incident) => !isMuted(context.policy, incident.kind, now)),
    newPoints: accepted.length,
    malformed,
    metricsReset: metrics.reset,
    dumpStacks,
    scriptAlertsSkipped,
    linksFound: links !== undefined,
  };
  if (incoming.derivedText !== undefined) evaluation.derivedText = incoming.derivedText;
  return evaluation;
}

/**
 * The evaluation's `raise`, which adds to `fresh`. Made here and returned unnamed: under tsx (`npm start`)
 * a closure bound to a name is wrapped to keep that name, about a microsecond on every evaluation.
 */
function raiserOf(
  state: MonitorState,
  runId: string,
  now: number,
  context: TickContext,
  fresh: Incident[],
): Raise {
  return (kind, key, fields, severity) => {
    fresh.push({
      id: `${runId}:${key}#${episodeCount(state.episodes, key)}`,
      runId,
      kind,
      severity: severity ?? SEVERITY[kind],
      at: now,
      launch: state.launch ?? context.meta.launchCount,
      ...fields,
      ...(state.links === undefined || context.trackerLinks !== true ? {} : { links: state.links }),
    });
  };
}

/** A replaced or truncated file starts its history over; new output.log lines join the (redacted) tail. */
function startOver(state: MonitorState, metrics: NewLines, log: NewLines): void {
  if (metrics.reset) {
    // The file was replaced or truncated: its steps start over, so the windows would mix two histories.
    state.rolling = createMonitorState().rolling;
    delete state.extras;
  }
  if (log.reset) state.logTail = '';
  if (log.lines.length > 0) {
    // Redacted as it is kept, so the cut to the last few KiB never keeps a secret's tail.
    state.logTail = redactedTail(`${state.logTail}${log.lines.join('\n')}\n`, LOG_TAIL_CHARS);
  }
}

/** Parse and observe each incoming point; count (and record) the malformed ones. */
function observePoints(
  state: MonitorState,
  points: ReturnType<TickContext['printedMetrics']['collect']>['points'],
  oversized: number,
  now: number,
  context: TickContext,
  raise: Raise,
): { accepted: AcceptedPoint[]; malformed: Evaluation['malformed'] } {
  let count = oversized;
  let firstReason: string | undefined = oversized > 0 ? 'line longer than the read cap' : undefined;
  let sample: string | undefined;
  const accepted: AcceptedPoint[] = [];
  for (const { line, parsed } of points) {
    if (!parsed.ok) {
      count++;
      firstReason ??= parsed.reason;
      sample ??= redactSecrets(line);
      continue;
    }
    const step = parsed.point.step ?? (state.rolling.lastStep ?? -1) + 1;
    const point = { ...parsed.point, step };
    accepted.push(point);
    observePoint(state, point, now, context, raise);
  }
  const note = recordMalformed(state.malformed, count, firstReason, sample);
  const malformed: Evaluation['malformed'] = { count };
  if (firstReason !== undefined) malformed.firstReason = firstReason;
  if (note !== undefined) malformed.note = note;
  return { accepted, malformed };
}

/** Grad norm, throughput, overfitting, idle GPUs and people's rules (tick-extras.ts). */
function observeExtras(
  state: MonitorState,
  accepted: AcceptedPoint[],
  processState: ProcessState,
  backlog: boolean,
  now: number,
  context: TickContext,
  raise: Raise,
): void {
  state.extras ??= createExtrasState();
  const extraRaises = runTickExtras({
    extras: state.extras,
    episodes: state.episodes,
    meta: context.meta,
    points: accepted,
    lastStep: state.rolling.lastStep,
    lastMetrics: state.rolling.lastMetrics,
    lossMetrics: lossMetricNames(state),
    now,
    processState,
    backlog,
    settings: context.detectors,
    policy: context.policy,
    gpu: context.gpu,
    woken: context.woken === true,
  });
  for (const item of extraRaises) raise(item.kind, item.key, item.fields);
}
