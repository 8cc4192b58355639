import type { Redis } from 'ioredis';
import { z } from 'zod';
import { definedOnly } from '../defined-only.js';
import { describeHubFailure } from './hub-tools.js';
import { type HubClient, hubRepoIdPattern } from './hub-types.js';
import {
  estimateMemory,
  formatMemoryEstimate,
  parseParameterCount,
  shortMemoryEstimate,
} from './memory-estimate.js';
import { defineTool, type ToolDefinition } from './registry.js';

/**
 * `estimate_memory`: memory per GPU for a fine-tune, with the parameter count from the Hub
 * (safetensors totals). The latest estimate of a thread is kept a day so the launch card that follows
 * can show it.
 */

const KEEP_SECONDS = 24 * 3600;

export interface MemoryNotes {
  record(threadId: string, model: string, text: string): Promise<void>;
  /** The thread's latest estimate; for a launch naming a model, only an estimate of that model. */
  latest(threadId: string, modelId: string | undefined): Promise<string | undefined>;
}

export function createMemoryNotes(redis: Redis, prefix: string): MemoryNotes {
  const key = (threadId: string) => `${prefix}:memory-estimate:${threadId}`;
  const noteSchema = z.object({ model: z.string(), text: z.string() });
  return {
    async record(threadId, model, text) {
      await redis.set(key(threadId), JSON.stringify({ model, text }), 'EX', KEEP_SECONDS);
    },
    async latest(threadId, modelId) {
      const raw = await redis.get(key(threadId));
      if (raw === null) return undefined;
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        return undefined;
      }
      const parsed = noteSchema.safeParse(value);
      if (!parsed.success) return undefined;
      if (modelId !== undefined && parsed.data.model.toLowerCase() !== modelId.toLowerCase())
        return undefined;
      return parsed.data.text;
    },
  };
}

const estimateInput = z.object({
  model: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .describe('Hub model id (owner/name) — its parameter count is read from the Hub — or a size like "7B"'),
  method: z.enum(['full', 'lora', 'qlora']).describe('full fine-tune, LoRA, or QLoRA (4-bit base)'),
  seq_len: z.number().int().min(1).max(1_048_576).describe('Sequence length in tokens'),
  batch_size: z.number().int().min(1).max(4096).describe('Micro-batch size per GPU'),
  gpus: z.number().int().min(1).max(1024).default(1).describe('GPUs (full fine-tunes shard over them)'),
});

export function createMemoryTool(options: {
  hub: HubClient;
  notes: MemoryNotes;
  gpuMemoryGb: number;
}): ToolDefinition {
  return defineTool({
    name: 'estimate_memory',
    description:
      'Estimate GPU memory per GPU for fine-tuning a model (full, LoRA or QLoRA) from its parameter count, precision, optimizer states, gradients and activations; says whether it fits on the cluster GPUs and what to change if not. Call it before start_training for any model over ~1B parameters; the launch card then shows the estimate.',
    input: estimateInput,
    async execute(input, context) {
      let parameters = parseParameterCount(input.model);
      if (parameters === undefined) {
        if (!hubRepoIdPattern.test(input.model)) {
          throw new Error(`"${input.model}" is neither a hub id (owner/name) nor a size like "7B"`);
        }
        let info: Awaited<ReturnType<HubClient['getModel']>>;
        try {
          info = await options.hub.getModel(input.model, definedOnly({ signal: context.signal }));
        } catch (error) {
          throw describeHubFailure(error, `read the size of ${input.model}`, input.model);
        }
        if (info.parameters === undefined) {
          throw new Error(
            `the hub has no parameter count for ${input.model} (no safetensors metadata); call estimate_memory again with model set to its size, e.g. "7B"`,
          );
        }
        parameters = info.parameters;
      }
      const request = {
        parameters,
        method: input.method,
        seqLen: input.seq_len,
        batchSize: input.batch_size,
        gpus: input.gpus,
        gpuMemoryGb: options.gpuMemoryGb,
      };
      const estimate = estimateMemory(request);
      await options.notes.record(context.threadId, input.model, shortMemoryEstimate(request, estimate));
      return formatMemoryEstimate(input.model, request, estimate);
    },
  });
}
