import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { z } from 'zod';
import { writeFileAtomic } from './records/atomic-file.js';

/**
 * Links to the run in the trackers it logs to, found in what the trackers print at start (output.log):
 *  - W&B:         `wandb: 🚀 View run glad-sun-3 at: https://wandb.ai/team/project/runs/abc123`
 *  - MLflow:      `🏃 View run bold-owl at: http://127.0.0.1:5000/#/experiments/1/runs/4f2c…`
 *  - Trackio:     `* View dashboard by going to: https://huggingface.co/spaces/user/space` (a Space), or
 *                 the local hint `trackio show --project "name"`
 *  - TensorBoard: `TensorBoard 2.16.2 at http://localhost:6006/`, or a `tensorboard --logdir runs` hint.
 * A value is a URL, or (no URL printed) the command that opens the dashboard.
 */

export const trackerLinksSchema = z.object({
  wandb: z.string().optional(),
  mlflow: z.string().optional(),
  trackio: z.string().optional(),
  tensorboard: z.string().optional(),
});
export type TrackerLinks = z.infer<typeof trackerLinksSchema>;
type Tracker = keyof TrackerLinks;

const LABELS: Record<Tracker, string> = {
  wandb: 'W&B',
  mlflow: 'MLflow',
  trackio: 'Trackio',
  tensorboard: 'TensorBoard',
};

/** Where the monitor keeps what it found, for `status` and the playground (derived, like stdout-metrics). */
const LINKS_FILE = '.shepherd/tracker-links.json';
const URL_TEXT = String.raw`https?://[^\s'"<>]+`;
const PATTERNS: ReadonlyArray<[Tracker, RegExp]> = [
  ['wandb', new RegExp(String.raw`^wandb:.*\bView run\b.*?(${URL_TEXT})`)],
  ['mlflow', new RegExp(String.raw`View run\b.*?(${URL_TEXT}/#/experiments/[^\s/]+/runs/[^\s/]+)`)],
  ['trackio', new RegExp(String.raw`View dashboard by going to:\s*(${URL_TEXT})`)],
  ['trackio', /(trackio show(?: --project (?:"[^"]*"|\S+))?)/],
  ['tensorboard', new RegExp(String.raw`^TensorBoard \S+ at (${URL_TEXT})`)],
  ['tensorboard', /(tensorboard --logdir[= ](?:"[^"]*"|'[^']*'|[^\s`'"]+))/],
];
const MAX_LINK_CHARS = 500;
/** Cheap test before the patterns: most lines mention none of them. */
const CANDIDATE = /View |https?:|--logdir|trackio show/;

/**
 * Links in `lines` that `known` does not have yet, merged into a copy of it; undefined when nothing new.
 * A URL wins over a command hint for the same tracker; the first URL of a tracker stays.
 */
export function findTrackerLinks(
  lines: readonly string[],
  known: TrackerLinks | undefined,
): TrackerLinks | undefined {
  let found: TrackerLinks | undefined;
  for (const raw of lines) {
    if (!CANDIDATE.test(raw)) continue;
    const line = raw.indexOf('\x1b') === -1 ? raw : stripVTControlCharacters(raw);
    for (const [tracker, pattern] of PATTERNS) {
      const value = pattern.exec(line)?.[1];
      if (value === undefined || value.length > MAX_LINK_CHARS) continue;
      const current = (found ?? known)?.[tracker];
      const isUrl = /^https?:/.test(value);
      if (current !== undefined && (/^https?:/.test(current) || !isUrl)) continue;
      found = { ...(found ?? known), [tracker]: value };
    }
  }
  return found;
}

/** `W&B: https://…` lines, in a fixed order. */
export function trackerLinkLines(links: TrackerLinks | undefined): Array<{ label: string; value: string }> {
  if (links === undefined) return [];
  const entries: Array<{ label: string; value: string }> = [];
  for (const tracker of Object.keys(LABELS) as Tracker[]) {
    const value = links[tracker];
    if (value !== undefined) entries.push({ label: LABELS[tracker], value });
  }
  return entries;
}

export async function writeTrackerLinks(runDir: string, links: TrackerLinks): Promise<void> {
  const file = path.join(runDir, LINKS_FILE);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFileAtomic(file, `${JSON.stringify(links)}\n`);
}

/** Links saved as JSON (the links file, a Redis value), or undefined when the text is not that. */
export function parseTrackerLinks(text: string): TrackerLinks | undefined {
  try {
    const parsed = trackerLinksSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The links the monitor found for a run, or undefined (none yet, or an unreadable file). */
export async function readTrackerLinks(runDir: string): Promise<TrackerLinks | undefined> {
  const text = await readFile(path.join(runDir, LINKS_FILE), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : parseTrackerLinks(text);
}
