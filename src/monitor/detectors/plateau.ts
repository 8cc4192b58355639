import { theilSen } from './trend.js';

/**
 * Plateau, decided from a noise-aware trend rather than a fixed threshold: over a window that grows with
 * the run (the last `plateauShare` of the steps so far, at least `plateauWindow` steps), fit the robust
 * Theil–Sen slope of log(loss) against log(step) and take its optimistic confidence bound. The loss has
 * plateaued when even that bound promises less than `plateauMinImprovement` (relative) over the window. A
 * noisy curve has a wide interval, so noise alone never looks like a plateau; a slow but real power-law
 * descent keeps a clearly negative slope. While the logged learning rate moves by more than 2× inside the
 * window (annealing, warm-up, SGDR restarts) the shape is the schedule's, so no verdict. Near the planned end of a run (when max_steps is known) a
 * flattening curve is expected, so the detector is silent there.
 */

export interface PlateauSettings {
  /** Minimum window in steps. */
  plateauWindow: number;
  /** Relative improvement over the window that still counts as progress. */
  plateauMinImprovement: number;
  /** Share of the steps so far the window covers (when larger than `plateauWindow`). */
  plateauShare: number;
  /** Silent during this final share of `max_steps`. */
  plateauEndShare: number;
  /** Normal quantile of the slope's two-sided confidence interval (2.576: 99 %, the optimistic bound 99.5 %). */
  plateauConfidenceZ: number;
}

interface PlateauVerdict {
  plateau: boolean;
  fromStep?: number;
  /** Relative improvement the trend projects over the window, and its optimistic bound. */
  improvement?: number;
  bestCase?: number;
}

const MIN_POINTS = 12;

type Points = ReadonlyArray<{ step: number; value: number }>;
type Visit = (step: number, value: number) => void;
/**
 * Points, or how to walk those from a step on (only what the window needs, only once it is needed, and
 * without building them: this runs every tick).
 */
type PointsFrom = Points | ((fromStep: number, visit: Visit) => void);

function eachPoint(points: PointsFrom, fromStep: number, visit: Visit): void {
  if (typeof points === 'function') points(fromStep, visit);
  else for (const point of points) visit(point.step, point.value);
}

export function checkPlateau(
  input: {
    points: PointsFrom;
    firstStep: number;
    lastStep: number;
    maxSteps?: number | undefined;
    /** The learning rate's points, when the run logs one. */
    learningRate?: PointsFrom | undefined;
  },
  settings: PlateauSettings,
): PlateauVerdict {
  const { lastStep, maxSteps } = input;
  if (maxSteps !== undefined && lastStep >= (1 - settings.plateauEndShare) * maxSteps)
    return { plateau: false };
  const span = Math.max(settings.plateauWindow, settings.plateauShare * lastStep);
  if (lastStep - input.firstStep < span) return { plateau: false };
  const fromStep = lastStep - span;
  if (scheduleMoved(input.learningRate, fromStep)) return { plateau: false };
  const xs: number[] = [];
  const ys: number[] = [];
  let nonPositive = false;
  eachPoint(input.points, fromStep, (step, value) => {
    if (nonPositive || step < fromStep || !Number.isFinite(value)) return;
    // log-loss needs a positive metric; a loss that can be ≤ 0 (RL objectives) has no plateau verdict.
    if (value <= 0) nonPositive = true;
    else {
      xs.push(Math.log(step + 1));
      ys.push(Math.log(value));
    }
  });
  if (nonPositive || xs.length < MIN_POINTS) return { plateau: false };
  const trend = theilSen(xs, ys, settings.plateauConfidenceZ);
  if (trend === undefined) return { plateau: false };
  const improvement = 1 - Math.exp(trend.slope * trend.range);
  const bestCase = 1 - Math.exp(trend.lower * trend.range);
  return { plateau: bestCase < settings.plateauMinImprovement, fromStep, improvement, bestCase };
}

/**
 * The learning rate changed by more than 2× inside the window (annealing, warm-up, a warm restart): a
 * flattening or a bump there is the schedule at work, not a stuck run.
 */
function scheduleMoved(learningRate: PointsFrom | undefined, fromStep: number): boolean {
  if (learningRate === undefined) return false;
  let low = Number.POSITIVE_INFINITY;
  let high = 0;
  eachPoint(learningRate, fromStep, (step, value) => {
    if (step < fromStep || !Number.isFinite(value) || value < 0) return;
    low = Math.min(low, value);
    high = Math.max(high, value);
  });
  return high > 0 && low < 0.5 * high;
}

/** The advice an info note carries: what usually helps, given where the run is. */
export function plateauSuggestion(lastStep: number, maxSteps: number | undefined): string {
  const early = maxSteps === undefined ? lastStep < 2000 : lastStep < 0.3 * maxSteps;
  return early
    ? 'This early, the learning rate is often too low (raise it) — or too high if the loss oscillates (lower it).'
    : 'If the model has converged, stopping early saves GPU time; otherwise try lowering the learning rate or adding data.';
}
