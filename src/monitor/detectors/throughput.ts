import { definedOnly } from '../../defined-only.js';
import { median } from './robust.js';

/**
 * Throughput drop: steps per second, measured per tick between ticks where the step advanced, below
 * `throughputDropRatio` × the running median of the previous rates for `throughputTicks` ticks in a row.
 * Catches a straggler node, a throttled GPU or a starving data loader while the run still makes progress
 * (no progress at all is a stall).
 */

export interface ThroughputSettings {
  throughputDropRatio: number;
  throughputTicks: number;
  /** Rates needed before the median means anything. */
  throughputMinHistory: number;
}

export interface ThroughputState {
  rates: number[];
  slow: number;
  lastStep?: number;
  lastAt?: number;
}

const MAX_RATES = 60;

export function createThroughputState(): ThroughputState {
  return { rates: [], slow: 0 };
}

/** Record one tick; returns whether the run is currently in a throughput drop and the figures. */
export function observeThroughput(
  state: ThroughputState,
  lastStep: number | undefined,
  now: number,
  settings: ThroughputSettings,
): { dropped: boolean; rate?: number; median?: number } {
  if (lastStep === undefined) return { dropped: false };
  if (state.lastStep === undefined || state.lastAt === undefined || lastStep < state.lastStep) {
    state.lastStep = lastStep;
    state.lastAt = now;
    state.slow = 0;
    return { dropped: false };
  }
  if (lastStep === state.lastStep) return { dropped: state.slow >= settings.throughputTicks };
  const seconds = (now - state.lastAt) / 1000;
  const advanced = lastStep - state.lastStep;
  state.lastStep = lastStep;
  state.lastAt = now;
  if (seconds <= 0) return { dropped: state.slow >= settings.throughputTicks };
  return record(state, advanced / seconds, settings);
}

function record(state: ThroughputState, rate: number, settings: ThroughputSettings) {
  const typical = state.rates.length >= settings.throughputMinHistory ? median(state.rates) : undefined;
  if (typical !== undefined && rate < settings.throughputDropRatio * typical) state.slow++;
  else state.slow = 0;
  state.rates.push(Number(rate.toPrecision(6)));
  if (state.rates.length > MAX_RATES) state.rates.shift();
  return {
    dropped: state.slow >= settings.throughputTicks,
    rate,
    ...definedOnly({ median: typical }),
  };
}
