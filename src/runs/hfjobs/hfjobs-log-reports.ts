import { appendFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { evaluationFileSchema, modelFileSchema, readEvaluationFile } from '../evaluation-files.js';
import { EVALUATION_MARKER } from '../evaluation-script.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import { RUN_FILES } from '../records/run-files.js';

/**
 * An HF job's files never reach Shepherd, so what the other backends leave in the run directory comes
 * through the job's log instead: the `--eval` wrapper's `[shepherd:evaluation] {…}` lines (evaluation.json),
 * the helper's `[eval] {…}` (eval_results.jsonl) and `[shepherd:model] {…}` (model.json), and the eval
 * command's output between the evaluation's start and end (eval.log). Each line is the job's own output, so
 * it is untrusted: parsed with the schema Shepherd reads those files with, and written back re-serialised,
 * so a forged line does no more than the script could do by writing the file itself (where it can).
 */

const EVAL_RESULTS_MARKER = '[eval] ';
const MODEL_MARKER = '[shepherd:model] ';
/** A longer line is not a report (the helper's are far shorter). */
const MAX_REPORT_CHARS = 64 * 1024;

const evalResultsSchema = z.record(z.string().min(1).max(200), z.unknown());

type Report =
  | { kind: 'evaluation'; record: z.infer<typeof evaluationFileSchema> }
  | { kind: 'results'; results: Record<string, number> }
  | { kind: 'model'; model: z.infer<typeof modelFileSchema> }
  | { kind: 'line' };

function jsonAfter(line: string, marker: string): unknown {
  try {
    return JSON.parse(line.slice(marker.length));
  } catch {
    return undefined;
  }
}

/** What one log line reports; `line` for output (a malformed report is output too). */
export function parseLogReport(raw: string): Report {
  const line = raw.trimEnd();
  if (line.length > MAX_REPORT_CHARS) return { kind: 'line' };
  if (line.startsWith(EVALUATION_MARKER)) {
    const parsed = evaluationFileSchema.safeParse(jsonAfter(line, EVALUATION_MARKER));
    if (parsed.success) return { kind: 'evaluation', record: parsed.data };
  } else if (line.startsWith(MODEL_MARKER)) {
    const parsed = modelFileSchema.safeParse(jsonAfter(line, MODEL_MARKER));
    if (parsed.success) return { kind: 'model', model: parsed.data };
  } else if (line.startsWith(EVAL_RESULTS_MARKER)) {
    const parsed = evalResultsSchema.safeParse(jsonAfter(line, EVAL_RESULTS_MARKER));
    if (parsed.success) {
      const results: Record<string, number> = {};
      for (const [name, value] of Object.entries(parsed.data)) {
        if (name !== 'ts' && typeof value === 'number' && Number.isFinite(value)) results[name] = value;
      }
      return { kind: 'results', results };
    }
  }
  return { kind: 'line' };
}

interface LogReports {
  /** Before the first batch: `resumed` when output.log already holds part of this job's log. */
  start(resumed: boolean): Promise<void>;
  /** Writes what a batch of lines reports; returns the lines output.log keeps (markers left out). */
  apply(lines: readonly string[]): Promise<string[]>;
}

export function createLogReports(runDir: string, jobId: string): LogReports {
  let evaluating = false;
  const file = (name: string) => path.join(runDir, name);
  const text = (lines: string[]) => lines.map((line) => (line.endsWith('\n') ? line : `${line}\n`)).join('');

  return {
    async start(resumed) {
      // After a bot restart mid-evaluation, the lines to come are still the eval command's.
      evaluating = resumed && (await readEvaluationFile(runDir))?.status === 'running';
    },
    async apply(lines) {
      const kept: string[] = [];
      const evalLog: string[] = [];
      const results: string[] = [];
      let evaluation: z.infer<typeof evaluationFileSchema> | undefined;
      let model: z.infer<typeof modelFileSchema> | undefined;
      for (const line of lines) {
        const report = parseLogReport(line);
        if (report.kind === 'evaluation') {
          evaluation = report.record;
          evaluating = report.record.status === 'running';
          continue;
        }
        if (report.kind === 'model') {
          model = report.model;
          continue;
        }
        if (report.kind === 'results' && Object.keys(report.results).length > 0)
          results.push(JSON.stringify(report.results));
        if (evaluating) evalLog.push(line);
        kept.push(line);
      }
      if (evalLog.length > 0) await appendFile(file(RUN_FILES.evalLog), text(evalLog));
      if (results.length > 0) await appendFile(file(RUN_FILES.evalResults), text(results));
      if (model !== undefined) {
        // The path is the job's: never one Shepherd may read (or push) on its own host.
        const located = { ...model, location: `HF job ${jobId}` };
        await writeFileAtomic(file(RUN_FILES.model), JSON.stringify(located));
      }
      // Last, once eval.log and the results it ends hold their lines.
      if (evaluation !== undefined)
        await writeFileAtomic(file(RUN_FILES.evaluation), JSON.stringify(evaluation));
      return kept;
    },
  };
}
