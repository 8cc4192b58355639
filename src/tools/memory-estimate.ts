/**
 * GPU memory for a fine-tune, per GPU, from the parameter count. Pure arithmetic (documented in
 * docs/agent.md) so it can be checked against published figures:
 *
 * - model states, bytes per parameter (ZeRO, Rajbhandari et al. 2019, mixed precision with Adam):
 *   full = 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master weights, Adam m and v) = 16,
 *   sharded over the GPUs (FSDP / ZeRO-3) when there are several;
 *   lora = 2 (frozen bf16 weights) + 16 × trainable adapters (0.6 % of the parameters, rank ~16 on
 *   every linear layer); qlora = 0.516 (NF4 with double quantisation, 4.127 bits, Dettmers et al. 2023)
 *   + the same adapters. LoRA and QLoRA keep a full copy of the base model on each GPU.
 * - activations, per GPU (Korthikanti et al. 2022, with flash attention): one layer holds about
 *   34·s·b·h bytes; without gradient checkpointing all L layers are kept, with it only each layer's
 *   input (2·s·b·h bytes per layer) plus one layer being recomputed. Hidden size h and layer count L
 *   come from the parameter count (P ≈ 12·L·h², L ≈ h/128, which fits Llama and Qwen shapes).
 * - logits for the loss: 4·s·b·V bytes in fp32, V = 128k (current vocabularies are 32k–256k).
 * - overhead: +10 % fragmentation and 1 GB for the CUDA context.
 */

type FineTuneMethod = 'full' | 'lora' | 'qlora';

interface MemoryEstimateInput {
  parameters: number;
  method: FineTuneMethod;
  seqLen: number;
  /** Per-GPU micro-batch size. */
  batchSize: number;
  gpus: number;
  gpuMemoryGb: number;
}

interface MemoryBreakdown {
  weightsGb: number;
  gradientsGb: number;
  optimizerGb: number;
  activationsGb: number;
  activationsCheckpointedGb: number;
  logitsGb: number;
  /** Per GPU, without / with gradient checkpointing, overhead included. */
  totalGb: number;
  totalCheckpointedGb: number;
}

interface MemoryEstimate extends MemoryBreakdown {
  fits: 'yes' | 'with-checkpointing' | 'no';
  suggestions: string[];
  hiddenSize: number;
  layers: number;
}

const GB = 1e9;
const LORA_TRAINABLE_FRACTION = 0.006;
const ASSUMED_VOCABULARY = 128_000;
const QLORA_BYTES_PER_PARAMETER = 4.127 / 8;

/** Hidden size and layers from P ≈ 12·L·h² with L ≈ h/128 (h rounded to a multiple of 64). */
function shapeFromParameters(parameters: number): { hiddenSize: number; layers: number } {
  const raw = Math.cbrt((parameters * 128) / 12);
  const hiddenSize = Math.max(64, Math.round(raw / 64) * 64);
  const layers = Math.max(1, Math.round(parameters / (12 * hiddenSize * hiddenSize)));
  return { hiddenSize, layers };
}

/** Model states per GPU in bytes: weights, gradients, optimizer. */
export function modelStateBytes(
  parameters: number,
  method: FineTuneMethod,
  gpus: number,
): { weights: number; gradients: number; optimizer: number } {
  if (method === 'full') {
    // Sharded when there is more than one GPU (FSDP full shard / ZeRO-3).
    const shards = Math.max(1, gpus);
    return {
      weights: (2 * parameters) / shards,
      gradients: (2 * parameters) / shards,
      optimizer: (12 * parameters) / shards,
    };
  }
  const adapters = parameters * LORA_TRAINABLE_FRACTION;
  const base = method === 'lora' ? 2 * parameters : QLORA_BYTES_PER_PARAMETER * parameters;
  return { weights: base + 2 * adapters, gradients: 2 * adapters, optimizer: 12 * adapters };
}

function withOverhead(bytes: number): number {
  return (bytes * 1.1) / GB + 1;
}

export function estimateMemory(input: MemoryEstimateInput): MemoryEstimate {
  const { parameters, method, seqLen, batchSize, gpuMemoryGb } = input;
  const gpus = Math.max(1, input.gpus);
  const { hiddenSize, layers } = shapeFromParameters(parameters);
  const states = modelStateBytes(parameters, method, gpus);
  const tokens = seqLen * batchSize;
  const perLayer = 34 * tokens * hiddenSize;
  const activations = perLayer * layers;
  const checkpointed = 2 * tokens * hiddenSize * layers + perLayer;
  const logits = 4 * tokens * ASSUMED_VOCABULARY;
  const stateTotal = states.weights + states.gradients + states.optimizer;
  const totalGb = withOverhead(stateTotal + activations + logits);
  const totalCheckpointedGb = withOverhead(stateTotal + checkpointed + logits);
  const fits =
    totalGb <= gpuMemoryGb ? 'yes' : totalCheckpointedGb <= gpuMemoryGb ? 'with-checkpointing' : 'no';
  const estimate: MemoryEstimate = {
    weightsGb: states.weights / GB,
    gradientsGb: states.gradients / GB,
    optimizerGb: states.optimizer / GB,
    activationsGb: activations / GB,
    activationsCheckpointedGb: checkpointed / GB,
    logitsGb: logits / GB,
    totalGb,
    totalCheckpointedGb,
    fits,
    suggestions: [],
    hiddenSize,
    layers,
  };
  estimate.suggestions = suggestionsFor(input, estimate);
  return estimate;
}

function suggestionsFor(input: MemoryEstimateInput, estimate: MemoryEstimate): string[] {
  if (estimate.fits === 'yes') return [];
  if (estimate.fits === 'with-checkpointing') {
    return [
      'turn on gradient checkpointing (model.gradient_checkpointing_enable(), or gradient_checkpointing=True)',
    ];
  }
  const suggestions: string[] = [];
  const states = estimate.weightsGb + estimate.gradientsGb + estimate.optimizerGb;
  const room = input.gpuMemoryGb - 1 - states * 1.1;
  if (room > 0) {
    // Activations and logits scale with the batch: find the largest batch that fits.
    const perSample = (estimate.totalCheckpointedGb - 1) / 1.1 - states;
    const batch = Math.floor((room / 1.1 / perSample) * input.batchSize);
    if (batch >= 1 && batch < input.batchSize) {
      const steps = Math.ceil(input.batchSize / batch);
      suggestions.push(
        `batch_size ${batch} with gradient checkpointing and ${steps} gradient accumulation steps (same effective batch)`,
      );
    } else if (batch < 1) {
      suggestions.push('a shorter seq_len: even one sample does not fit at this length');
    }
  }
  if (input.method === 'full') {
    const needed = Math.ceil((16 * input.parameters * 1.1) / GB / Math.max(1, input.gpuMemoryGb - 8));
    if (needed > input.gpus)
      suggestions.push(`at least ${needed} GPUs with FSDP/ZeRO-3 sharding (gpus: ${needed})`);
    suggestions.push('or LoRA (method lora) or QLoRA (method qlora), which train a small adapter');
  } else if (input.method === 'lora') {
    suggestions.push('or QLoRA (method qlora): the base model in 4 bits takes a quarter of the memory');
  } else {
    suggestions.push('or a smaller model, or GPUs with more memory');
  }
  return suggestions;
}

function gb(value: number): string {
  return value >= 10 ? value.toFixed(0) : value.toFixed(1);
}

export function formatMemoryEstimate(
  model: string,
  input: MemoryEstimateInput,
  estimate: MemoryEstimate,
): string {
  const verdict =
    estimate.fits === 'yes'
      ? `fits on a ${input.gpuMemoryGb} GB GPU`
      : estimate.fits === 'with-checkpointing'
        ? `fits on a ${input.gpuMemoryGb} GB GPU only with gradient checkpointing`
        : `does NOT fit on a ${input.gpuMemoryGb} GB GPU`;
  const lines = [
    `${model}, ${input.method}, ${(input.parameters / 1e9).toFixed(2)}B parameters, seq_len ${input.seqLen}, batch ${input.batchSize} per GPU, ${input.gpus} GPU${input.gpus === 1 ? '' : 's'}:`,
    `≈ ${gb(estimate.totalGb)} GB per GPU (${gb(estimate.totalCheckpointedGb)} GB with gradient checkpointing) — ${verdict}.`,
    `weights ${gb(estimate.weightsGb)} GB · gradients ${gb(estimate.gradientsGb)} GB · optimizer ${gb(estimate.optimizerGb)} GB · activations ${gb(estimate.activationsGb)} GB (${gb(estimate.activationsCheckpointedGb)} GB checkpointed) · logits ${gb(estimate.logitsGb)} GB · +10 % and 1 GB CUDA overhead`,
  ];
  if (estimate.suggestions.length > 0) lines.push(`To fit: ${estimate.suggestions.join('; ')}.`);
  lines.push(
    `Assumes bf16 mixed precision with AdamW${input.method === 'full' ? (input.gpus > 1 ? ', states sharded over the GPUs (FSDP/ZeRO-3)' : '') : ', LoRA rank ~16 on all linear layers'}, a ${estimate.layers}-layer ${estimate.hiddenSize}-wide shape inferred from the size and a 128k vocabulary; a rough guide, ±20 %.`,
  );
  return lines.join('\n');
}

/** The short form for the launch card's field. */
export function shortMemoryEstimate(input: MemoryEstimateInput, estimate: MemoryEstimate): string {
  const verdict =
    estimate.fits === 'yes'
      ? 'fits'
      : estimate.fits === 'with-checkpointing'
        ? 'fits with checkpointing'
        : 'does not fit';
  return `≈ ${gb(estimate.totalGb)} GB/GPU (${gb(estimate.totalCheckpointedGb)} GB checkpointed), ${input.method}, ${verdict} in ${input.gpuMemoryGb} GB`;
}

/** "7B", "0.5b", "1.5e9", "494M" → parameters; undefined for anything else. */
export function parseParameterCount(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbt]?)\s*$/i.exec(text);
  if (match === null) return undefined;
  const scale: Record<string, number> = { '': 1, k: 1e3, m: 1e6, b: 1e9, t: 1e12 };
  const value = Number(match[1]) * (scale[(match[2] ?? '').toLowerCase()] ?? 1);
  return value >= 1e6 ? value : undefined;
}
