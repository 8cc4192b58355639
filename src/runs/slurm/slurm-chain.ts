/**
 * Wall-time chains: a run whose `--hours` exceed its partition's `MaxTime` runs as segments of at most
 * MaxTime each. Shepherd submits segment k+1 when segment k ended at its time limit (run-endings.ts), as a
 * relaunch under the same approval, so every segment goes through the launch path (checkpoint re-check,
 * resume.json) and a crash in a segment is a crash, not a reason to start the next one. Pure.
 */

export interface SegmentPlan {
  /** 1-based. */
  index: number;
  of: number;
  /** `--time` of this segment. */
  hours: number;
}

/**
 * `MaxTime` of a partition from `scontrol show partition -o [name]`, in minutes; undefined when it is
 * unlimited or not shown. Without a name, the default partition's (`Default=YES`).
 */
export function parsePartitionMaxMinutes(output: string, partition?: string): number | undefined {
  const field = (line: string, key: string) => new RegExp(`(?:^|\\s)${key}=(\\S+)`).exec(line)?.[1];
  const lines = output.split('\n').filter((line) => field(line, 'PartitionName') !== undefined);
  const line =
    partition === undefined
      ? (lines.find((text) => field(text, 'Default') === 'YES') ??
        (lines.length === 1 ? lines[0] : undefined))
      : lines.find((text) => field(text, 'PartitionName') === partition);
  const value = line === undefined ? undefined : field(line, 'MaxTime');
  return value === undefined ? undefined : slurmMinutes(value);
}

/** Slurm's time formats: `UNLIMITED`, `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`; minutes. */
function slurmMinutes(value: string): number | undefined {
  if (/^(UNLIMITED|INFINITE|NONE)$/i.test(value)) return undefined;
  const match = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(value);
  if (match === null) return undefined;
  const [, days, first = '0', second, third] = match;
  const numbers = [first, second, third].filter((part) => part !== undefined).map(Number);
  let minutes: number;
  if (days !== undefined) {
    // D-H, D-H:M, D-H:M:S
    minutes = Number(days) * 1440 + (numbers[0] ?? 0) * 60 + (numbers[1] ?? 0) + (numbers[2] ?? 0) / 60;
  } else if (numbers.length === 3)
    minutes = (numbers[0] ?? 0) * 60 + (numbers[1] ?? 0) + (numbers[2] ?? 0) / 60;
  else if (numbers.length === 2) minutes = (numbers[0] ?? 0) + (numbers[1] ?? 0) / 60;
  else minutes = numbers[0] ?? 0;
  return minutes > 0 ? minutes : undefined;
}

/**
 * Segment `index` of a run of `maxHours` on a partition whose MaxTime is `maxMinutes`; undefined when the
 * run fits in one job (no chain). The last segment gets what is left of the budget.
 */
export function planSegment(
  maxHours: number,
  maxMinutes: number | undefined,
  index: number,
): SegmentPlan | undefined {
  if (maxMinutes === undefined || maxHours * 60 <= maxMinutes + 1e-9) return undefined;
  const of = Math.ceil((maxHours * 60) / maxMinutes - 1e-9);
  const at = Math.min(Math.max(1, Math.floor(index)), of);
  const left = maxHours - ((at - 1) * maxMinutes) / 60;
  return { index: at, of, hours: Math.min(maxMinutes / 60, left) };
}
