import { z } from 'zod';
import { ToolPolicyError } from '../errors.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import type { RunQueries } from '../runs/run-queries.js';
import { redactSecrets } from '../text/redact.js';
import type { CheckpointLister } from './checkpoint-listing.js';
import { defineTool, type ToolDefinition } from './registry.js';
import { parseRunFile, readLogFile, readScriptFile, summariseMetrics } from './run-file-reader.js';
import { runReference } from './run-reference.js';
import { applyEdits } from './script-edits.js';

/**
 * The agent's eyes on a run between turns — `read_run_file`, `list_checkpoints` — and `edit_script`,
 * a patch that goes the same way as `update_script` (syntax check, diff card, approval, archive).
 * Everything quoted from a run is redacted before the model sees it.
 */

const readInput = z.object({
  run: runReference(),
  file: z
    .string()
    .min(1)
    .max(40)
    .describe(
      'train.py (current script), train_vN.py (archived version N), output.log (the tail by default), metrics (a summary), config, or meta',
    ),
  start_line: z.number().int().min(1).optional().describe('First line to show (1-based)'),
  end_line: z.number().int().min(1).optional().describe('Last line to show; at most 200 lines per call'),
  grep: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('Only lines matching this regular expression (case-insensitive), with 2 lines of context'),
});

const editInput = z.object({
  run: runReference(),
  edits: z
    .array(
      z.object({
        old: z.string().min(1).describe('Exact text in the current train.py; must occur exactly once'),
        new: z.string().describe('Its replacement'),
      }),
    )
    .min(1)
    .max(20)
    .describe('Exact-match replacements, applied in order'),
  reason: z.string().min(1).max(500).describe('Why the change is needed, shown on the card'),
});

export function createRunInspectTools(options: {
  runs: RunQueries;
  operations: RunOperations;
  checkpoints: CheckpointLister;
}): ToolDefinition[] {
  const { runs, operations } = options;
  return [
    defineTool({
      name: 'read_run_file',
      description:
        "Read a run's files: train.py or an archived train_vN.py (numbered lines), output.log (last 100 lines by default; start_line/end_line for a range, grep to search with context), a metrics summary, the run's config or its meta. At most 200 lines or 16 KB per call; the answer says how to get more.",
      input: readInput,
      async execute(input) {
        const meta = await runs.find(input.run);
        const file = parseRunFile(input.file);
        if (file === undefined) {
          throw new ToolPolicyError(
            'unknown_run_file',
            `"${input.file}" is not a run file I can read; use train.py, train_vN.py, output.log, metrics, config or meta`,
          );
        }
        if (
          input.start_line !== undefined &&
          input.end_line !== undefined &&
          input.end_line < input.start_line
        ) {
          throw new ToolPolicyError('bad_range', 'end_line is before start_line');
        }
        const window = { startLine: input.start_line, endLine: input.end_line, grep: input.grep };
        let text: string;
        switch (file.kind) {
          case 'script':
            text = await readScriptFile(runs, meta, file.version, file.label, window);
            break;
          case 'log':
            text = await readLogFile(runs, meta, window);
            break;
          case 'metrics':
            text = await summariseMetrics(runs, meta);
            break;
          case 'config':
            text =
              meta.config === undefined
                ? `${meta.name} has no config (start_training's config was not given).`
                : `config of ${meta.name}:\n${JSON.stringify(meta.config, null, 2)}`;
            break;
          case 'meta':
            text = `meta of ${meta.name}:\n${JSON.stringify(meta, null, 2)}`;
            break;
        }
        return redactSecrets(text);
      },
    }),
    defineTool({
      name: 'list_checkpoints',
      description:
        "List a run's checkpoints: step, path, time, the loss at that step, and whether it was healthy (outside a NaN or divergence episode). Use it to pick where a restart or a fix should continue from.",
      input: z.object({ run: runReference() }),
      async execute(input) {
        const meta = await runs.find(input.run);
        const all = await options.checkpoints(meta.id);
        if (all.length === 0) {
          return `${meta.name} has saved no checkpoint yet (the script records them with shepherd.save_checkpoint(step, path)).`;
        }
        const shown = all.slice(-50);
        const lines = shown.map((checkpoint) =>
          [
            `• step ${checkpoint.step}`,
            checkpoint.path ?? '(no path)',
            checkpoint.time ?? 'time unknown',
            checkpoint.loss === undefined ? 'loss unknown' : `loss ${formatLoss(checkpoint.loss)}`,
            checkpoint.healthy ? 'healthy' : `NOT healthy (${checkpoint.problem ?? 'bad curve'})`,
            checkpoint.intact === false && 'file gone or overwritten since',
          ]
            .filter((part): part is string => typeof part === 'string')
            .join(' · '),
        );
        const header = `${all.length} checkpoint${all.length === 1 ? '' : 's'} of ${meta.name}${all.length > shown.length ? ` (the last ${shown.length} shown)` : ''}:`;
        return redactSecrets([header, ...lines].join('\n'));
      },
    }),
    defineTool({
      name: 'edit_script',
      description:
        "Change a run's train.py by exact-match replacements (each `old` must occur exactly once; otherwise you get the candidate lines). The diff goes to the team on an approval card, like update_script; once approved the old version is archived and the run restarts from its last checkpoint. Read the script with read_run_file first. Use update_script only for whole rewrites.",
      input: editInput,
      async execute(input, context) {
        const meta = await runs.find(input.run);
        const current = await runs.readScript(meta.id);
        const edited = applyEdits(current, input.edits);
        if (!edited.ok) throw new ToolPolicyError('edit_not_applied', redactSecrets(edited.error));
        const result = await operations.updateScript(
          meta.id,
          edited.script,
          input.reason,
          context.actor,
          context.threadId,
          'agent',
          {
            name: 'edit_script',
            input: { run: input.run, reason: input.reason, edits: input.edits.length },
          },
        );
        return result.diff === '' ? result.text : `${result.text}\n\nDiff:\n${redactSecrets(result.diff)}`;
      },
    }),
  ];
}

function formatLoss(value: number): string {
  return Number.isFinite(value) ? value.toPrecision(4) : String(value);
}
