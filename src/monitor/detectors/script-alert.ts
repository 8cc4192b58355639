import { z } from 'zod';
import { redactSecrets } from '../../text/redact.js';

/**
 * Alerts the script raised itself with `shepherd.alert(title, text, level)`: one JSON line each in the run's
 * `alerts.jsonl`. The helper already drops repeats of a title within `wait` seconds in its own process;
 * the monitor drops them again across processes (every rank of a torchrun job may call `alert`).
 */

const recordSchema = z.object({
  ts: z.number(),
  title: z.string().min(1),
  text: z.string().default(''),
  level: z.enum(['info', 'warn', 'error']).catch('warn'),
  step: z.number().nullable().optional(),
  wait: z.number().nonnegative().catch(300),
});

type Severity = 'info' | 'warning' | 'critical';

/** Per title, the record time (epoch seconds) of its last posted alert. */
export type ScriptAlertBook = Record<string, number>;

const SEVERITY: Record<z.infer<typeof recordSchema>['level'], Severity> = {
  info: 'info',
  warn: 'warning',
  error: 'critical',
};
const LEVEL_WORD = { info: 'Note', warn: 'Warning', error: 'Error' } as const;
const MAX_TITLE_CHARS = 200;
const MAX_TEXT_CHARS = 2000;
/** Titles remembered for the repeat check; the oldest go first (a script inventing titles forever). */
const MAX_TITLES = 200;

interface ScriptAlert {
  /** The title as the script gave it (the episode key's suffix). */
  title: string;
  severity: Severity;
  /** The incident's text (incident-text.ts `IncidentText`). */
  fields: { title: string; summary: string; metrics: string[]; step?: number };
}

const cut = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

function parseRecord(line: string): z.infer<typeof recordSchema> | undefined {
  try {
    const parsed = recordSchema.safeParse(JSON.parse(line));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The alerts to post from new `alerts.jsonl` lines, oldest first; updates `book`. Unreadable lines are
 * counted in `skipped` (the caller logs them). `chartMetrics` are the run's metrics the card charts.
 */
export function readScriptAlerts(
  lines: readonly string[],
  book: ScriptAlertBook,
  runName: string,
  chartMetrics: string[],
): { alerts: ScriptAlert[]; skipped: number } {
  const alerts: ScriptAlert[] = [];
  let skipped = 0;
  for (const line of lines) {
    if (line.trim() === '') continue;
    const record = parseRecord(line);
    if (record === undefined) {
      skipped++;
      continue;
    }
    const title = cut(redactSecrets(record.title.trim()), MAX_TITLE_CHARS);
    const last = book[title];
    if (last !== undefined && record.ts - last < record.wait) continue;
    delete book[title];
    book[title] = record.ts;
    const titles = Object.keys(book);
    for (const old of titles.slice(0, Math.max(0, titles.length - MAX_TITLES))) delete book[old];
    const step = record.step ?? undefined;
    const text = cut(redactSecrets(record.text.trim()), MAX_TEXT_CHARS);
    const where = step === undefined ? '' : ` at step ${step}`;
    alerts.push({
      title,
      severity: SEVERITY[record.level],
      fields: {
        title: `${runName}: ${title}`,
        summary: `${LEVEL_WORD[record.level]} from the script${where}${text === '' ? '.' : `: ${text}`}`,
        metrics: chartMetrics,
        ...(step === undefined ? {} : { step }),
      },
    });
  }
  return { alerts, skipped };
}
