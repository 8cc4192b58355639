import type { ProcessState } from '../runs/executor.js';
import { redactSecrets } from '../text/redact.js';
import { checkStall } from './detectors/stall.js';
import { isEpisodeActive, observeEpisode } from './episodes.js';
import { stallText } from './incident-text.js';
import type { MonitorState } from './monitor-state.js';
import { lossMetricNames, type Raise } from './observe.js';
import { medianStepIntervalMs } from './rolling-stats.js';
import { describeFrames, mainThreadOf, parseStackDump, renderStackDump } from './stack-dump.js';
import type { TickContext } from './tick-context.js';

/**
 * The stall detector with its hang dump. A stall is a stall only after the stacks were asked for and no
 * step moved: the first tick past the limit asks (the shell sends SIGUSR2 or runs py-spy) and raises
 * nothing; output.log lines after that are kept; the next tick still without a step raises the alert
 * with the main thread's innermost frames, and the whole dump for triage.
 */

/** Log text kept after a dump was asked for (a dump of many threads is a few KiB). */
const DUMP_LOG_CHARS = 64 * 1024;

/** New output.log lines join the pending dump's text while the stall is not yet alerted. */
export function collectDumpLines(state: MonitorState, lines: readonly string[]): void {
  const pending = state.stallDump;
  if (pending === undefined || lines.length === 0 || isEpisodeActive(state.episodes, 'stall')) return;
  pending.log = `${pending.log}${redactSecrets(lines.join('\n'))}\n`.slice(-DUMP_LOG_CHARS);
}

/** Returns true when the shell should ask for a stack dump now. */
export function observeStall(
  state: MonitorState,
  processState: ProcessState,
  now: number,
  context: TickContext,
  raise: Raise,
): boolean {
  const rolling = state.rolling;
  const stall = checkStall({
    state: processState,
    now,
    lastProgressAt: rolling.lastStepAt ?? state.firstTickAt,
    medianStepIntervalMs: medianStepIntervalMs(rolling),
    stallS: context.detectors.stallS,
  });
  if (!stall.stalled) delete state.stallDump;
  else if (state.stallDump === undefined && !isEpisodeActive(state.episodes, 'stall')) {
    state.stallDump = { askedAt: now, log: '' };
    return true;
  }
  if (observeEpisode(state.episodes, 'stall', stall.stalled)) {
    const threads = parseStackDump(state.stallDump?.log ?? '');
    const main = mainThreadOf(threads);
    const text = stallText(
      context.meta.name,
      stall.idleMs,
      rolling.lastStep,
      lossMetricNames(state).slice(0, 2),
      {
        how: state.stallDump?.how,
        mainFrames: main === undefined ? undefined : describeFrames(main),
      },
    );
    if (threads.length > 0) text.stackDump = renderStackDump(threads);
    raise('stall', 'stall', text);
    // The alert carries the dump; the state (written every tick) need not.
    if (state.stallDump !== undefined) state.stallDump.log = '';
  }
  return false;
}
