import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * The dataset format check of `inspect_dataset {dataset, method}`: does a dataset have the columns a
 * training method needs (TRL's dataset formats), and which of its columns could be renamed into the
 * missing ones. The latest verdict of a thread is kept a day so the launch card that follows shows it.
 */

export const TRAINING_METHODS = ['sft', 'dpo', 'grpo', 'kto', 'reward', 'classification'] as const;
type TrainingMethod = (typeof TRAINING_METHODS)[number];

/** A column and its type as `describeFeatureType` says it (`string`, `list<{content: string, role: string}>`). */
interface Column {
  name: string;
  type: string;
}

/** Columns commonly found in place of the ones a method needs. */
const ALIASES: Record<string, string[]> = {
  prompt: ['question', 'instruction', 'query', 'input', 'problem', 'context'],
  completion: ['answer', 'output', 'response', 'solution', 'target'],
  chosen: ['chosen_response', 'response_j', 'accepted', 'preferred'],
  rejected: ['rejected_response', 'response_k', 'dispreferred'],
  messages: ['conversations', 'conversation', 'dialog', 'chat'],
  label: ['labels', 'is_desirable', 'desirable', 'class', 'category', 'target'],
  text: ['sentence', 'content', 'review', 'document', 'body'],
};

/** Each method's accepted layouts; the first is the one named when none fits. */
const LAYOUTS: Record<TrainingMethod, string[][]> = {
  sft: [['messages'], ['text'], ['prompt', 'completion']],
  dpo: [['prompt', 'chosen', 'rejected']],
  grpo: [['prompt']],
  kto: [['prompt', 'completion', 'label']],
  reward: [['chosen', 'rejected']],
  classification: [['text', 'label']],
};

interface FormatVerdict {
  ok: boolean;
  /** One line for the approval card. */
  summary: string;
  /** The tool's lines for the agent. */
  lines: string[];
}

const isConversation = (column: Column | undefined) =>
  column !== undefined && /^list<\{.*content.*role.*\}>$|^list<\{.*role.*content.*\}>$/.test(column.type);

/** Where a missing column could come from: an alias the dataset has, or undefined. */
function mappingFor(needed: string, columns: readonly Column[], used: Set<string>): string | undefined {
  return (ALIASES[needed] ?? []).find(
    (alias) => !used.has(alias) && columns.some((column) => column.name === alias),
  );
}

export function checkDatasetFormat(
  dataset: string,
  method: TrainingMethod,
  columns: readonly Column[],
): FormatVerdict {
  const names = new Set(columns.map((column) => column.name));
  const byName = (name: string) => columns.find((column) => column.name === name);
  const fits = LAYOUTS[method].find((layout) => layout.every((name) => names.has(name)));
  // DPO's implicit prompt: chosen and rejected as whole conversations carry the prompt in them.
  const implicit =
    method === 'dpo' &&
    fits === undefined &&
    isConversation(byName('chosen')) &&
    isConversation(byName('rejected'));
  if (fits !== undefined || implicit) {
    const layout = implicit ? 'chosen/rejected conversations (implicit prompt)' : (fits ?? []).join(', ');
    return {
      ok: true,
      summary: `✅ ${dataset} fits ${method} (${layout})`,
      lines: [`Format check for ${method}: ✅ ${dataset} has what ${method} needs: ${layout}.`],
    };
  }
  // The layout that needs the fewest renames (ties: the first listed).
  const candidates = LAYOUTS[method].map((layout) => {
    const used = new Set<string>();
    const plan = layout.map((needed) => {
      if (names.has(needed)) return { needed };
      const from = mappingFor(needed, columns, used);
      if (from !== undefined) used.add(from);
      return { needed, from, missing: from === undefined };
    });
    return { layout, plan, unmapped: plan.filter((step) => step.missing === true).length };
  });
  const best = candidates.reduce((chosen, candidate) =>
    candidate.unmapped < chosen.unmapped ? candidate : chosen,
  );
  const missing = best.plan.filter((step) => !names.has(step.needed)).map((step) => step.needed);
  const renames = best.plan.flatMap((step) =>
    step.from === undefined ? [] : [`${step.from} → ${step.needed}`],
  );
  const unmapped = best.plan.filter((step) => step.missing === true).map((step) => step.needed);
  const wants = LAYOUTS[method].map((layout) => layout.join(' + ')).join(' or ');
  const lines = [
    `Format check for ${method}: ❌ ${dataset} lacks ${missing.join(', ')} (${method} needs ${wants}; it has ${[...names].join(', ')}).`,
  ];
  if (renames.length > 0)
    lines.push(`Could be mapped: ${renames.join(', ')} (rename the columns in the training script).`);
  if (unmapped.length > 0)
    lines.push(`No column could become ${unmapped.join(', ')}: the data needs reshaping or another dataset.`);
  const fix = unmapped.length === 0 ? `map ${renames.join(', ')}` : `no column for ${unmapped.join(', ')}`;
  return { ok: false, summary: `❌ ${dataset} lacks ${missing.join(', ')} for ${method}; ${fix}`, lines };
}

const KEEP_SECONDS = 24 * 3600;

export interface DatasetChecks {
  record(threadId: string, summary: string): Promise<void>;
  /** The thread's latest verdict, if one was made in the last day. */
  latest(threadId: string): Promise<string | undefined>;
}

export function createDatasetChecks(redis: Redis, prefix: string): DatasetChecks {
  const key = (threadId: string) => `${prefix}:dataset-check:${threadId}`;
  return {
    async record(threadId, summary) {
      await redis.set(key(threadId), JSON.stringify({ summary }), 'EX', KEEP_SECONDS);
    },
    async latest(threadId) {
      const raw = await redis.get(key(threadId));
      if (raw === null) return undefined;
      try {
        const parsed = z.object({ summary: z.string() }).safeParse(JSON.parse(raw));
        return parsed.success ? parsed.data.summary : undefined;
      } catch {
        return undefined;
      }
    },
  };
}
