import { z } from 'zod';
import { defineTool } from './registry.js';

const helpInput = z.object({
  topic: z
    .enum(['overview', 'runs', 'approvals', 'monitoring', 'commands'])
    .optional()
    .describe('Which part to explain; leave out for the overview of everything.'),
});

function sections(
  botName: string,
): Record<'overview' | 'runs' | 'approvals' | 'monitoring' | 'commands', string> {
  return {
    overview: [
      `${botName} runs ML training jobs from this chat thread. Anyone in the thread can talk to it; it sees who said what.`,
      'It can: launch a training script as a run, ask the team to approve it, pause / resume / stop runs,',
      'report status (step, loss trend, GPUs, last log lines), draw metric charts, watch runs for crashes,',
      'loss spikes, divergence and stalls, and propose fixes as script diffs that need approval.',
      'It can also search the model hub for models and datasets when planning a fine-tune.',
    ].join(' '),
    runs: [
      'Runs: describe what to train (model, data, method, GPUs, max hours) or point at a script,',
      `and ${botName} writes or uses the script and launches it as a named run on free GPUs (local or Slurm).`,
      'Each run belongs to the thread that launched it; its status and alerts are posted there.',
      'Pause checkpoints and frees the GPUs; resume continues from the last checkpoint.',
    ].join(' '),
    approvals: [
      'Approvals: every start, every resume that takes GPUs, and every script change posts a card with',
      'the requester, GPUs, max hours, estimated cost and the script (or its diff), with Approve / Reject buttons.',
      'Team policy decides who may approve and whether you may approve your own job. The first decision wins.',
    ].join(' '),
    monitoring: [
      'Monitoring: runs are watched quietly. On a crash, a loss spike, divergence or a stall the thread gets one',
      'alert with a chart and buttons (Acknowledge / Stop run / Ask to fix). Nothing is posted while a run is healthy.',
    ].join(' '),
    commands: [
      'Plain commands work even when the language model is down:',
      '`help`, `runs` (list runs), `status <run>`, `pause <run>`, `resume <run>`, `stop <run>`,',
      '`run <script.py> [--gpus N] [--name X] [--hours H]`, `chart <run> [metric] [--steps FROM..TO]`,',
      '`sweep <script.py> --grid lr=1e-4,3e-4 [--grid …] [--gpus N] [--hours H] [--name X] [--metric M] [--mode min|max] [--canary-steps K] [--parallel P]`,',
      '`sweep-status <sweep>`, `compare <run> <run> … [metric] [--steps A..B]`, `spend [--days N] [--by person|channel]`.',
    ].join(' '),
  };
}

/** The `help` tool: what Shepherd can do, so the model can answer "what can you do?" accurately. */
export function createHelpTool(options: { botName?: string } = {}) {
  const botName = options.botName ?? 'shepherd';
  const text = sections(botName);
  return defineTool({
    name: 'help',
    description: `Describe what ${botName} can do (runs, approvals, monitoring, plain commands). Use it when someone asks what you can do or how something works.`,
    kind: 'read',
    input: helpInput,
    async execute(input) {
      if (input.topic !== undefined) return text[input.topic];
      return Object.values(text).join('\n\n');
    },
  });
}
