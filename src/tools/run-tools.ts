import { z } from 'zod';
import { definedOnly } from '../defined-only.js';
import { ToolPolicyError } from '../errors.js';
import type { RunOperations } from '../runs/operations/operation-types.js';
import { defineTool, type ToolDefinition } from './registry.js';
import { runReference } from './run-reference.js';

/** `--on` for the agent: which configured backend runs it; `get_cluster_info` lists them. */
const backendArgument = z
  .string()
  .max(32)
  .optional()
  .describe(
    'Where to run: local, slurm, k8s or hf (one of the configured backends); default: the default backend',
  );

const startTrainingInput = z.object({
  name: z.string().min(1).max(80).describe('Short run name, e.g. qwen-gsm8k-sft'),
  script: z
    .string()
    .min(1)
    .optional()
    .describe(
      'The complete Python source of train.py (uses `import shepherd` to log metrics). Give this or `command`.',
    ),
  command: z
    .array(z.string().min(1))
    .min(1)
    .max(200)
    .optional()
    .describe(
      'Instead of `script`: an existing command from the workspace, as argv (no shell), e.g. ["torchrun","--nproc_per_node","2","train.py","--lr","3e-4"] or ["bash","train.sh"]',
    ),
  cwd: z.string().max(500).optional().describe('With `command`: directory inside the workspace to run it in'),
  env: z.string().max(64).optional().describe('Named environment (SHEPHERD_ENVIRONMENTS) to run in'),
  gpus: z.number().int().min(0).max(64).describe('GPUs to use; 0 runs on CPU'),
  max_hours: z
    .number()
    .positive()
    .max(720)
    .optional()
    .describe('Time limit in hours (also the cost estimate)'),
  model_id: z.string().max(200).optional().describe('Model being trained, e.g. Qwen/Qwen2.5-0.5B'),
  backend: backendArgument,
  image: z
    .string()
    .max(255)
    .optional()
    .describe('Container image (Kubernetes, or a local run in a container)'),
  flavor: z.string().max(64).optional().describe('HF Jobs hardware flavour, e.g. a10g-small (backend "hf")'),
  eval: z
    .string()
    .min(1)
    .max(2000)
    .optional()
    .describe(
      'Shell command run in the run directory after training exits 0 (status "evaluating"), e.g. "python eval.py"; it may call shepherd.log_eval(**numbers) or print {\'eval_loss\': …} dicts (every backend but Kubernetes without a PVC; on HF Jobs it runs in the job’s directory)',
    ),
  config: z.record(z.string(), z.unknown()).optional().describe('Hyper-parameters to record with the run'),
});

/** The agent's run tools, all going through the same operations (and approvals) as plain commands. */
export function createRunTools(operations: RunOperations): ToolDefinition[] {
  return [
    defineTool({
      name: 'start_training',
      description:
        'Create a training run from a complete train.py and ask the team to approve it (an approval card is posted; the run starts when a teammate approves). You are told the decision later.',
      input: startTrainingInput,
      execute: (input, context) => {
        if ((input.script === undefined) === (input.command === undefined)) {
          throw new ToolPolicyError('invalid_input', 'give exactly one of `script` and `command`');
        }
        if (input.command !== undefined) {
          return operations.runCommand(
            input.command,
            {
              gpus: input.gpus,
              runName: input.name,
              ...definedOnly({
                maxHours: input.max_hours,
                env: input.env,
                cwd: input.cwd,
                on: input.backend,
                image: input.image,
                flavor: input.flavor,
                evalCommand: input.eval,
              }),
            },
            context.threadId,
            context.actor,
            { origin: 'agent', toolCall: { name: 'start_training', input } },
          );
        }
        return operations.launch({
          name: input.name,
          script: input.script ?? '',
          gpus: input.gpus,
          threadId: context.threadId,
          requester: context.actor,
          origin: 'agent',
          toolCall: {
            name: 'start_training',
            input: { ...input, script: `(${(input.script ?? '').length} characters)` },
          },
          ...definedOnly({
            environment: input.env,
            maxHours: input.max_hours,
            modelId: input.model_id,
            config: input.config,
            backend: input.backend,
          }),
          ...(input.image === undefined && input.flavor === undefined && input.eval === undefined
            ? {}
            : {
                launch: definedOnly({ image: input.image, flavor: input.flavor, evalCommand: input.eval }),
              }),
        });
      },
    }),
    defineTool({
      name: 'list_training_runs',
      description: 'List all training runs of the team with status, GPUs and last step.',
      input: z.object({}),
      execute: () => operations.list(),
    }),
    defineTool({
      name: 'get_training_status',
      description: 'Status of one run: state, GPUs, last metrics and trend, last checkpoint, last log lines.',
      input: z.object({ run: runReference() }),
      execute: (input) => operations.status(input.run),
    }),
    defineTool({
      name: 'pause_training',
      description:
        'Pause a run: it saves a checkpoint and stops, freeing its GPUs. Resume later continues from the checkpoint.',
      input: z.object({ run: runReference() }),
      execute: (input, context) => operations.pause(input.run, context.actor, context.threadId, 'agent'),
    }),
    defineTool({
      name: 'resume_training',
      description:
        'Resume a paused (or failed) run from its last checkpoint. Runs with GPUs need a new approval.',
      input: z.object({ run: runReference() }),
      execute: (input, context) =>
        operations.resume(input.run, context.actor, context.threadId, 'agent', {
          name: 'resume_training',
          input,
        }),
    }),
    defineTool({
      name: 'stop_training',
      description: 'Stop a run for good (it gets a chance to checkpoint first).',
      input: z.object({ run: runReference() }),
      execute: (input, context) => operations.stop(input.run, context.actor, context.threadId, 'agent'),
    }),
    defineTool({
      name: 'update_script',
      description:
        'Propose a new train.py for a run. The diff goes to the team on an approval card; once approved the old version is archived (train_vN.py) and the run restarts from its last checkpoint. Returns the unified diff.',
      input: z.object({
        run: runReference(),
        script: z.string().min(1).describe('The complete new Python source of train.py'),
        reason: z.string().min(1).max(500).describe('Why the change is needed, shown on the card'),
      }),
      execute: async (input, context) => {
        const result = await operations.updateScript(
          input.run,
          input.script,
          input.reason,
          context.actor,
          context.threadId,
          'agent',
          {
            name: 'update_script',
            input: { run: input.run, reason: input.reason },
          },
        );
        return result.diff === '' ? result.text : `${result.text}\n\nDiff:\n${result.diff}`;
      },
    }),
    defineTool({
      name: 'get_cluster_info',
      description: 'GPUs in total, free, and held by each run; host load (or Slurm nodes and queue).',
      input: z.object({}),
      execute: () => operations.cluster(),
    }),
  ];
}
