import { createReadStream } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { RunError } from '../errors.js';
import { parseMetricLine } from '../runs/file-tail.js';
import { RUN_FILES } from '../runs/records/run-files.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { RunQueries } from '../runs/run-queries.js';

/**
 * What `read_run_file` reads: a script version, output.log, a metrics summary, the config or the meta.
 * Every answer is at most MAX_LINES lines or MAX_BYTES, numbered, and ends with how to get more.
 */

export const MAX_LINES = 200;
export const MAX_BYTES = 16 * 1024;
const DEFAULT_LOG_TAIL = 100;
const GREP_CONTEXT = 2;
const MAX_LINE_CHARS = 500;

type RunFileKind =
  | { kind: 'script'; version: number | undefined; label: string }
  | { kind: 'log' }
  | { kind: 'metrics' }
  | { kind: 'config' }
  | { kind: 'meta' };

export function parseRunFile(file: string): RunFileKind | undefined {
  const name = file.trim().toLowerCase();
  if (name === RUN_FILES.script || name === 'script')
    return { kind: 'script', version: undefined, label: RUN_FILES.script };
  const archived = /^train_v(\d+)\.py$/.exec(name);
  if (archived !== null) return { kind: 'script', version: Number(archived[1]), label: name };
  if (name === RUN_FILES.output || name === 'log') return { kind: 'log' };
  if (name === 'metrics' || name === RUN_FILES.metrics) return { kind: 'metrics' };
  if (name === 'config') return { kind: 'config' };
  if (name === 'meta' || name === RUN_FILES.meta) return { kind: 'meta' };
  return undefined;
}

interface LineWindow {
  startLine?: number | undefined;
  endLine?: number | undefined;
  grep?: string | undefined;
}

interface NumberedLine {
  number: number;
  text: string;
}

function cutLine(text: string): string {
  return text.length > MAX_LINE_CHARS ? `${text.slice(0, MAX_LINE_CHARS)} … (line cut)` : text;
}

/** Numbered lines, stopping at MAX_BYTES; returns the text and how many lines made it in. */
function renderLines(lines: NumberedLine[]): { text: string; shown: number } {
  const width = String(lines.at(-1)?.number ?? 1).length;
  let text = '';
  let shown = 0;
  let previous: number | undefined;
  for (const line of lines) {
    const gap = previous !== undefined && line.number > previous + 1 ? '--\n' : '';
    const next = `${gap}${String(line.number).padStart(width)}| ${cutLine(line.text)}\n`;
    if (Buffer.byteLength(text + next) > MAX_BYTES) break;
    text += next;
    shown += 1;
    previous = line.number;
  }
  return { text, shown };
}

function grepPattern(grep: string): RegExp {
  try {
    return new RegExp(grep, 'i');
  } catch {
    return new RegExp(grep.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
  }
}

/**
 * One pass over the lines: a window (start/end), the tail, or grep matches with context. Works on a
 * stream so a log of many GB is never held in memory.
 */
async function selectLines(
  lines: AsyncIterable<string> | Iterable<string>,
  window: LineWindow,
  defaultMode: 'head' | 'tail',
): Promise<{ selected: NumberedLine[]; total: number; matches: number }> {
  const selected: NumberedLine[] = [];
  let total = 0;
  let matches = 0;
  if (window.grep !== undefined) {
    const pattern = grepPattern(window.grep);
    const before: NumberedLine[] = [];
    let afterLeft = 0;
    for await (const text of lines) {
      total += 1;
      const line = { number: total, text };
      const inRange =
        (window.startLine === undefined || total >= window.startLine) &&
        (window.endLine === undefined || total <= window.endLine);
      if (inRange && pattern.test(text)) {
        matches += 1;
        if (selected.length < MAX_LINES) {
          for (const context of before)
            if ((selected.at(-1)?.number ?? 0) < context.number) selected.push(context);
          selected.push(line);
          afterLeft = GREP_CONTEXT;
        }
        before.length = 0;
        continue;
      }
      if (afterLeft > 0 && selected.length < MAX_LINES) {
        selected.push(line);
        afterLeft -= 1;
      } else {
        before.push(line);
        if (before.length > GREP_CONTEXT) before.shift();
      }
    }
    return { selected, total, matches };
  }
  const explicit = window.startLine !== undefined || window.endLine !== undefined;
  if (!explicit && defaultMode === 'tail') {
    for await (const text of lines) {
      total += 1;
      selected.push({ number: total, text });
      if (selected.length > DEFAULT_LOG_TAIL) selected.shift();
    }
    return { selected, total, matches };
  }
  const start = window.startLine ?? 1;
  const end = Math.min(window.endLine ?? start + MAX_LINES - 1, start + MAX_LINES - 1);
  for await (const text of lines) {
    total += 1;
    if (total >= start && total <= end) selected.push({ number: total, text });
  }
  return { selected, total, matches };
}

function footer(
  label: string,
  result: { selected: NumberedLine[]; total: number; matches: number },
  shown: number,
  window: LineWindow,
): string {
  const first = result.selected[0]?.number;
  const last = result.selected[shown - 1]?.number;
  if (window.grep !== undefined) {
    const more =
      shown < result.selected.length || result.selected.length >= MAX_LINES
        ? ` Not all matches are shown: narrow grep or pass start_line=${(last ?? 0) + 1} to continue.`
        : '';
    return `(${result.matches} line${result.matches === 1 ? '' : 's'} of ${label} match /${window.grep}/, ${result.total} lines in all.${more})`;
  }
  if (first === undefined || last === undefined) {
    return `(${label} has ${result.total} lines; nothing in that range.)`;
  }
  const hints: string[] = [];
  if (first > 1) hints.push(`earlier: end_line=${first - 1}`);
  if (last < result.total) hints.push(`next: start_line=${last + 1}`);
  hints.push('or grep to search');
  return `(lines ${first}–${last} of ${result.total} in ${label}; ${hints.join(', ')}. At most ${MAX_LINES} lines or 16 KB per call.)`;
}

export async function readNumbered(
  label: string,
  lines: AsyncIterable<string> | Iterable<string>,
  window: LineWindow,
  defaultMode: 'head' | 'tail',
): Promise<string> {
  const result = await selectLines(lines, window, defaultMode);
  const { text, shown } = renderLines(result.selected);
  return `${label}:\n${text}${footer(label, result, shown, window)}`;
}

async function scriptVersions(runs: RunQueries, meta: RunMeta): Promise<string> {
  const files = await readdir(runs.runDirectory(meta.id)).catch(() => [] as string[]);
  const archived = files
    .map((file) => /^train_v(\d+)\.py$/.exec(file)?.[1])
    .filter((version): version is string => version !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
  return archived.length === 0
    ? `train.py is v${meta.scriptVersion}; no archived versions`
    : `train.py is v${meta.scriptVersion}; archived: ${archived.map((version) => `train_v${version}.py`).join(', ')}`;
}

export async function readScriptFile(
  runs: RunQueries,
  meta: RunMeta,
  version: number | undefined,
  label: string,
  window: LineWindow,
): Promise<string> {
  let source: string;
  try {
    source = await runs.readScript(meta.id, version);
  } catch (error) {
    if (error instanceof RunError && error.code === 'script_not_found') {
      throw new RunError(
        'script_not_found',
        `${meta.name} has no ${label} (${await scriptVersions(runs, meta)})`,
      );
    }
    throw error;
  }
  const lines = source.endsWith('\n') ? source.slice(0, -1).split('\n') : source.split('\n');
  const text = await readNumbered(`${label} of ${meta.name}`, lines, window, 'head');
  return `${text}\n${await scriptVersions(runs, meta)}.`;
}

export async function readLogFile(runs: RunQueries, meta: RunMeta, window: LineWindow): Promise<string> {
  const file = path.join(runs.runDirectory(meta.id), RUN_FILES.output);
  const stream = createReadStream(file, { encoding: 'utf8' });
  const opened = await new Promise<boolean>((resolve) => {
    stream.once('open', () => resolve(true));
    stream.once('error', () => resolve(false));
  });
  if (!opened) return `${meta.name} has no output.log yet (it is ${meta.status.replace('_', ' ')}).`;
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  try {
    return await readNumbered(`output.log of ${meta.name}`, lines, window, 'tail');
  } finally {
    lines.close();
    stream.destroy();
  }
}

function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 1000 || Number.isInteger(value) ? String(value) : value.toPrecision(4);
}

/** Per metric: points, first → last, min and max with their steps, non-finite count; the last lines. */
export async function summariseMetrics(runs: RunQueries, meta: RunMeta): Promise<string> {
  const text = await readFile(path.join(runs.runDirectory(meta.id), RUN_FILES.metrics), 'utf8').catch(
    () => '',
  );
  const records = text
    .split('\n')
    .map(parseMetricLine)
    .filter((record) => record !== undefined);
  if (records.length === 0) return `${meta.name} has logged no metrics yet.`;
  const stats = new Map<
    string,
    {
      count: number;
      first: number;
      last: number;
      min: number;
      minStep?: number;
      max: number;
      maxStep?: number;
      bad: number;
    }
  >();
  for (const record of records) {
    for (const [name, value] of Object.entries(record.values)) {
      const entry = stats.get(name) ?? {
        count: 0,
        first: value,
        last: value,
        min: Number.POSITIVE_INFINITY,
        max: Number.NEGATIVE_INFINITY,
        bad: 0,
      };
      entry.count += 1;
      entry.last = value;
      if (!Number.isFinite(value)) entry.bad += 1;
      else {
        if (value < entry.min) {
          entry.min = value;
          if (record.step !== undefined) entry.minStep = record.step;
        }
        if (value > entry.max) {
          entry.max = value;
          if (record.step !== undefined) entry.maxStep = record.step;
        }
      }
      stats.set(name, entry);
    }
  }
  const steps = records.map((record) => record.step).filter((step) => step !== undefined);
  const lines = [
    `metrics of ${meta.name}: ${records.length} lines, steps ${steps[0] ?? '?'}–${steps.at(-1) ?? '?'}`,
  ];
  for (const [name, entry] of [...stats.entries()].slice(0, 30)) {
    const range =
      entry.count > entry.bad
        ? `, min ${formatValue(entry.min)}${entry.minStep === undefined ? '' : ` @${entry.minStep}`}, max ${formatValue(entry.max)}${entry.maxStep === undefined ? '' : ` @${entry.maxStep}`}`
        : '';
    lines.push(
      `• ${name}: ${entry.count} points, ${formatValue(entry.first)} → ${formatValue(entry.last)}${range}${entry.bad > 0 ? `, ${entry.bad} NaN/inf` : ''}`,
    );
  }
  lines.push('last 5 lines:');
  for (const record of records.slice(-5)) {
    lines.push(
      `  step ${record.step ?? '?'}: ${Object.entries(record.values)
        .map(([name, value]) => `${name}=${formatValue(value)}`)
        .join(', ')}`,
    );
  }
  lines.push('(show_metrics draws a chart; read_run_file output.log with grep finds the log around a step.)');
  return lines.join('\n');
}
