import { RUN_FILES } from '../runs/records/run-files.js';

/**
 * Which of a run's files a wake-up named, as bits: a woken evaluation reads only those (and every file on a
 * hold's first evaluation), so a line in metrics.jsonl costs one file read, not three.
 */
export type WokenFiles = number;

export const WOKEN_FILE_BITS = {
  metrics: 1,
  log: 2,
  alerts: 4,
} as const;

/** Every file: a watch that did not name the file, or a hold whose first read must catch up on all. */
export const ALL_WOKEN_FILES: WokenFiles =
  WOKEN_FILE_BITS.metrics | WOKEN_FILE_BITS.log | WOKEN_FILE_BITS.alerts;

const BIT_OF_NAME: ReadonlyMap<string, number> = new Map([
  [RUN_FILES.metrics, WOKEN_FILE_BITS.metrics],
  [RUN_FILES.output, WOKEN_FILE_BITS.log],
  [RUN_FILES.alerts, WOKEN_FILE_BITS.alerts],
]);

/** The bit of a changed file's name: 0 for a file no evaluation reads, every bit when the name is unknown. */
export function wokenFileBit(fileName: string | undefined): WokenFiles {
  if (fileName === undefined) return ALL_WOKEN_FILES;
  return BIT_OF_NAME.get(fileName) ?? 0;
}
