import { z } from 'zod';
import { defineTool } from './registry.js';

const helpInput = z.object({
  topic: z
    .enum(['overview', 'runs', 'approvals', 'monitoring', 'commands', 'playbooks'])
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
      'It can also search the model hub for models and datasets, look inside a dataset and estimate GPU memory',
      "when planning a fine-tune, read a run's script, log, metrics and checkpoints, and come back to",
      'the thread when a run it follows finishes, fails, alerts or stalls ("when it is done, evaluate it").',
      'It runs grids of trials (sweeps) behind one approval card, compares runs on one chart, and reports GPU spend.',
    ].join(' '),
    runs: [
      'Runs: describe what to train (model, data, method, GPUs, max hours) or point at a script,',
      `and ${botName} writes or uses the script and launches it as a named run on free GPUs (local or Slurm).`,
      'Each run belongs to the thread that launched it; its status and alerts are posted there.',
      'Pause checkpoints and frees the GPUs; resume continues from the last checkpoint.',
    ].join(' '),
    approvals: [
      'Approvals: every start, every resume that takes GPUs, and every script change posts a card with',
      'the requester, GPUs, max hours, estimated cost and the script (or its diff), with Approve / Reject / Edit buttons.',
      'Reject asks for an optional reason; Edit lets an approver change GPUs, hours, name and the script (a sweep card: GPUs and hours per trial and the sweep name; a recurring-job card: the cron) before approving.',
      'Team policy decides who may approve and whether you may approve your own job. The first decision wins.',
      'A script that does not compile gets no card (the error and its line are posted instead); a CPU pre-flight',
      'of a few steps may run first, and the card then shows its result.',
    ].join(' '),
    monitoring: [
      'Monitoring: runs are watched quietly. On a crash, NaN, a loss spike, divergence, a stall, overfitting, a throughput drop,',
      'a grad-norm explosion or idle GPUs the thread gets one alert with a chart and buttons (Acknowledge / Stop run / Ask to fix);',
      'a plateau gets one info note with a suggestion. Nothing is posted while a run is healthy. People can add their own rules',
      '(`alert <run> when eval_loss > 2.5 [for N steps]`, `when step < 1000 at 2h`) and mute a detector (`mute <run> plateau [for 2h]`).',
    ].join(' '),
    commands: [
      'Plain commands work even when the language model is down:',
      '`help`, `runs` (list runs), `status <run>`, `pause <run>`, `resume <run> [--on BACKEND]`, `stop <run>`,',
      '`run <script.py|script.sh> [--gpus N] [--name X] [--hours H] [--env E] [--logdir DIR] [--on local|slurm|k8s|hf] [--image I] [--flavor F]`,',
      '`run [--gpus N] [--name X] [--hours H] [--env E] [--cwd DIR] [--logdir DIR] [--eval "CMD"] [--nodes N] [--on B] [--image I] [--flavor F] -- <command …>` (torchrun, accelerate, bash train.sh, …; `--eval` runs CMD after training exits 0; `--logdir` is where its TensorBoard event files are, inside the workspace),',
      '`push <run> [--repo ns/name] [--public]` (publish the model a run saved to the Hub, after an approver approves),',
      '`fork <run> [--from-step N] [--set key=value …] [--name X] [--gpus N]` (a new run from a checkpoint of another, with changed arguments; approved like any run; also the Fork button of a model-ready card, which opens a form), `status <run> --full` (adds what the launch recorded: command, seed, git, Python, pip freeze, torch, CUDA, model and dataset revisions),',
      '`watch slurm:<jobid> [--name X]`, `watch k8s:<namespace>/<job>`, `watch hf:<job id>` or `watch <log file> [--pid N]` (runs you started yourself),',
      '`chart <run> [metric] [--steps FROM..TO]`, `schedule <run> --cron "0 3 * * *"` (a recurring HF job, after approval),',
      '`sweep <script.py> --grid lr=1e-4,3e-4 [--grid …] [--gpus N] [--hours H] [--name X] [--metric M] [--mode min|max] [--canary-steps K] [--parallel P] [--on B]`,',
      '`sweep-status <sweep>`, `compare <run> <run> … [metric] [--steps A..B]` (also the Compare button of a model-ready card), `spend [--days N] [--by person|channel]`, `spend --llm [--days N]`,',
      '`alert <run> when <metric> <op> <value> [for N steps]`, `alerts <run>`, `mute <run> <detector> [for 2h]`, `unmute <run> <detector>`.',
      '`session` (summary, model, LLM spend, follows), `model <name>`, `reset` (fresh session), `cancel` (stop the running turn),',
      '`budget` (the thread’s LLM spend and cap), `budget +N` (an approver raises the cap by N dollars).',
    ].join(' '),
  };
}

/** The `help` tool: what Shepherd can do, so the model can answer "what can you do?" accurately. */
export function createHelpTool(options: { botName?: string; playbooks?: () => Promise<string> } = {}) {
  const botName = options.botName ?? 'shepherd';
  const text = sections(botName);
  return defineTool({
    name: 'help',
    description: `Describe what ${botName} can do (runs, approvals, monitoring, plain commands, playbooks). Use it when someone asks what you can do or how something works.`,
    input: helpInput,
    async execute(input) {
      const playbooks = (await options.playbooks?.()) ?? 'Playbooks: none installed.';
      if (input.topic === 'playbooks') return playbooks;
      if (input.topic !== undefined) return text[input.topic];
      return [...Object.values(text), playbooks].join('\n\n');
    },
  });
}
