import type { ClusterInfo } from '../executor.js';
import type { CommandResult, RunCommand } from './slurm-command.js';
import { nodeUnavailable, parseScontrolNodes } from './slurm-parse.js';

/** Nodes, GPUs and the queue of the configured partition (or the whole cluster): `status` and `cluster`. */
export async function slurmClusterInfo(
  run: RunCommand,
  partition: string | undefined,
  failure: (command: string, result: CommandResult) => Error,
): Promise<ClusterInfo> {
  const queueArgs = ['-h', '-o', '%T', ...(partition === undefined ? [] : ['-p', partition])];
  const [nodesResult, queueResult] = await Promise.all([
    run('scontrol', ['show', 'node', '-d', '-o']),
    run('squeue', queueArgs),
  ]);
  if (nodesResult.exitCode !== 0) throw failure('scontrol show node', nodesResult);
  if (queueResult.exitCode !== 0) throw failure('squeue', queueResult);
  const nodes = parseScontrolNodes(nodesResult.stdout).filter(
    (node) => partition === undefined || node.partitions.includes(partition),
  );
  const jobStates = queueResult.stdout.split('\n').filter((line) => line.trim().length > 0);
  const pending = jobStates.filter((state) => state.trim() === 'PENDING').length;
  const gpusTotal = nodes.reduce((sum, node) => sum + node.gpusTotal, 0);
  const gpusFree = nodes
    .filter((node) => !nodeUnavailable(node.state))
    .reduce((sum, node) => sum + Math.max(0, node.gpusTotal - node.gpusAllocated), 0);
  const unavailable = nodes.filter((node) => nodeUnavailable(node.state));
  const notes = [
    `${jobStates.length} job(s) in the Slurm queue${partition === undefined ? '' : ` of partition ${partition}`}, ${pending} pending`,
  ];
  if (unavailable.length > 0) {
    notes.push(`unavailable nodes: ${unavailable.map((node) => `${node.name} (${node.state})`).join(', ')}`);
  }
  return {
    executor: 'slurm',
    nodes: nodes.map(({ name, state, gpusTotal: total, gpusAllocated }) => ({
      name,
      state,
      gpusTotal: total,
      gpusAllocated,
    })),
    gpusTotal,
    gpusFree,
    queueLength: jobStates.length,
    notes,
  };
}
