import { describe, expect, it } from 'vitest';
import {
  estimateMemory,
  formatMemoryEstimate,
  modelStateBytes,
  parseParameterCount,
} from '../../src/tools/memory-estimate.js';

/*
 * estimate_memory's arithmetic against published figures:
 * - ZeRO (Rajbhandari et al. 2019, §3.1): mixed-precision Adam needs 16 bytes per parameter of model
 *   states, "at least 24 GB" for GPT-2 with 1.5B parameters; Figure 1: a 7.5B model needs 120 GB per GPU
 *   with plain data parallelism and 1.9 GB per GPU with all states partitioned over 64 GPUs (ZeRO-3).
 * - QLoRA (Dettmers et al. 2023): a 65B model fine-tunes on a single 48 GB GPU (4-bit NF4 with double
 *   quantisation, gradient checkpointing).
 */

const GB = 1e9;
const total = (states: { weights: number; gradients: number; optimizer: number }) =>
  (states.weights + states.gradients + states.optimizer) / GB;

describe('model states (ZeRO paper figures)', () => {
  it('GPT-2 1.5B, full fine-tune, one GPU: 24 GB of model states', () => {
    expect(total(modelStateBytes(1.5e9, 'full', 1))).toBeCloseTo(24, 5);
  });

  it('7.5B, full fine-tune: 120 GB on one GPU, 1.9 GB per GPU sharded over 64', () => {
    expect(total(modelStateBytes(7.5e9, 'full', 1))).toBeCloseTo(120, 5);
    expect(total(modelStateBytes(7.5e9, 'full', 64))).toBeCloseTo(1.9, 1);
  });
});

describe('estimateMemory', () => {
  it('QLoRA 65B fits a 48 GB GPU with gradient checkpointing (QLoRA paper), not without', () => {
    const estimate = estimateMemory({
      parameters: 65.2e9,
      method: 'qlora',
      seqLen: 512,
      batchSize: 1,
      gpus: 1,
      gpuMemoryGb: 48,
    });
    // 4.127 bits per parameter: the frozen base model alone is about 33.6 GB.
    expect(estimate.weightsGb).toBeGreaterThan(33.6);
    expect(estimate.weightsGb).toBeLessThan(35);
    expect(estimate.fits).toBe('with-checkpointing');
    expect(estimate.totalCheckpointedGb).toBeLessThanOrEqual(48);
    expect(estimate.suggestions[0]).toMatch(/gradient checkpointing/);
  });

  it('a 7B full fine-tune does not fit one 80 GB GPU and names what to change', () => {
    const input = {
      parameters: 6.74e9,
      method: 'full',
      seqLen: 2048,
      batchSize: 4,
      gpus: 1,
      gpuMemoryGb: 80,
    } as const;
    const estimate = estimateMemory(input);
    expect(estimate.fits).toBe('no');
    expect(estimate.suggestions.join('; ')).toMatch(/at least 2 GPUs with FSDP\/ZeRO-3 sharding \(gpus: 2\)/);
    expect(estimate.suggestions.join('; ')).toMatch(/LoRA/);
    // Sharded over 2 GPUs with checkpointing it fits.
    expect(estimateMemory({ ...input, gpus: 2 }).fits).toBe('with-checkpointing');
    const text = formatMemoryEstimate('meta-llama/Llama-2-7b-hf', input, estimate);
    expect(text).toContain('does NOT fit on a 80 GB GPU');
    expect(text).toContain('To fit:');
  });

  it('suggests a smaller batch with accumulation when only the activations are too big', () => {
    const estimate = estimateMemory({
      parameters: 6.74e9,
      method: 'lora',
      seqLen: 4096,
      batchSize: 32,
      gpus: 1,
      gpuMemoryGb: 40,
    });
    expect(estimate.fits).toBe('no');
    const batch = /batch_size (\d+) with gradient checkpointing and (\d+) gradient accumulation steps/.exec(
      estimate.suggestions[0] ?? '',
    );
    expect(batch).not.toBeNull();
    const smaller = Number(batch?.[1]);
    expect(smaller).toBeGreaterThanOrEqual(1);
    expect(smaller).toBeLessThan(32);
    // The suggested batch really fits.
    expect(
      estimateMemory({
        parameters: 6.74e9,
        method: 'lora',
        seqLen: 4096,
        batchSize: smaller,
        gpus: 1,
        gpuMemoryGb: 40,
      }).fits,
    ).not.toBe('no');
  });

  it('LoRA keeps 2 bytes per frozen parameter; activations grow with seq_len × batch', () => {
    const small = estimateMemory({
      parameters: 1e9,
      method: 'lora',
      seqLen: 512,
      batchSize: 1,
      gpus: 1,
      gpuMemoryGb: 80,
    });
    const large = estimateMemory({
      parameters: 1e9,
      method: 'lora',
      seqLen: 1024,
      batchSize: 2,
      gpus: 1,
      gpuMemoryGb: 80,
    });
    expect(small.weightsGb).toBeCloseTo(2 + 0.012, 2);
    expect(large.activationsGb / small.activationsGb).toBeCloseTo(4, 5);
    expect(small.fits).toBe('yes');
    expect(small.suggestions).toEqual([]);
  });
});

describe('parseParameterCount', () => {
  it('reads sizes, not hub ids', () => {
    expect(parseParameterCount('7B')).toBe(7e9);
    expect(parseParameterCount('0.5b')).toBe(5e8);
    expect(parseParameterCount('494M')).toBe(494e6);
    expect(parseParameterCount('Qwen/Qwen2.5-0.5B')).toBeUndefined();
    expect(parseParameterCount('12')).toBeUndefined();
  });
});
