import type { LaunchRecord } from '../runs/launch/launch-record.js';
import type { RunMeta } from '../runs/records/run-types.js';
import { evalLine, formatValue, formatWall } from './model-ready-card.js';
import type { ModelSummary } from './model-summary.js';

/**
 * The `README.md` (model card) pushed with a model: the Hub's metadata block, the metrics, the training
 * configuration and where the model came from. Pure; the caller gathers the provenance.
 */

export interface ModelProvenance {
  git?: { commit: string; dirty: boolean };
  /** sha256 of the training script (train.py, or the `.py` a command run named). */
  scriptSha256?: string;
  /** Who approved the run's launch (from its audit trail). */
  runApprover?: string;
  pushRequester: string;
  pushApprover: string;
  pushedAt: string;
  /** Model and dataset revisions the run printed or the thread's Hub tools resolved (launch record). */
  revisions?: string[];
  /** The newest launch's record (command, seed, git, environment, `pip freeze`). */
  launch?: LaunchRecord;
}

/** A YAML scalar the Hub's front-matter parser reads back as the same string. */
function yamlString(value: string): string {
  return /^[\w./@+-]+$/.test(value) ? value : JSON.stringify(value);
}

function strings(value: unknown): string[] {
  if (typeof value === 'string' && value !== '') return [value];
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function metadataBlock(meta: RunMeta): string[] {
  const info = meta.model?.info ?? {};
  const baseModel = strings(info.base_model)[0] ?? meta.modelId;
  const datasets = [...strings(info.datasets), ...strings(info.dataset)];
  const library = strings(info.library_name)[0] ?? strings(info.library)[0];
  const license = strings(info.license)[0];
  const tags = ['shepherd', ...strings(info.tags).filter((tag) => tag !== 'shepherd')];
  const lines = ['---'];
  if (baseModel !== undefined) lines.push(`base_model: ${yamlString(baseModel)}`);
  if (datasets.length > 0) lines.push('datasets:', ...datasets.map((name) => `- ${yamlString(name)}`));
  if (library !== undefined) lines.push(`library_name: ${yamlString(library)}`);
  if (license !== undefined) lines.push(`license: ${yamlString(license)}`);
  lines.push('tags:', ...tags.map((tag) => `- ${yamlString(tag)}`), '---');
  return lines;
}

function metricsTable(summary: ModelSummary): string[] {
  const { metric } = summary;
  const rows = [
    '| Metric | Value |',
    '| --- | --- |',
    `| ${metric.name} (final) | ${formatValue(metric.final)} |`,
    `| ${metric.name} (best, ${metric.mode}) | ${formatValue(metric.best)}${metric.bestStep === undefined ? '' : ` (step ${metric.bestStep})`} |`,
  ];
  for (const [name, value] of Object.entries(summary.evalResults))
    rows.push(`| ${name} (eval) | ${formatValue(value)} |`);
  return rows;
}

function trainingLines(meta: RunMeta, summary: ModelSummary): string[] {
  const command = meta.command === undefined ? 'python -u train.py' : meta.command.join(' ');
  const args = meta.args === undefined || meta.args.length === 0 ? '' : ` ${meta.args.join(' ')}`;
  const lines = [
    `- Command: \`${command}${args}\``,
    `- GPUs: ${meta.gpus}`,
    `- Wall time: ${formatWall(summary.wallMs)} (${summary.gpuHours.toFixed(2)} GPU-hours, $${summary.costUsd.toFixed(2)})`,
    `- Backend: ${meta.placement ?? meta.executor}`,
  ];
  if (meta.config !== undefined && Object.keys(meta.config).length > 0)
    lines.push(`- Configuration: \`${JSON.stringify(meta.config)}\``);
  if (meta.evalCommand !== undefined) lines.push(`- Evaluation: \`${meta.evalCommand}\``);
  if (summary.bestCheckpointStep !== undefined)
    lines.push(`- Best checkpoint: step ${summary.bestCheckpointStep}`);
  if (meta.lastStep !== undefined) lines.push(`- Steps: ${meta.lastStep}`);
  return lines;
}

function provenanceLines(meta: RunMeta, provenance: ModelProvenance): string[] {
  const git =
    provenance.git === undefined
      ? 'not recorded'
      : `${provenance.git.commit}${provenance.git.dirty ? ' (dirty working tree)' : ' (clean)'}`;
  return [
    `- Git commit: ${git}`,
    `- Script sha256: ${provenance.scriptSha256 ?? 'not recorded'}`,
    `- Shepherd run id: ${meta.id}`,
    `- Run requested by: ${meta.requester.name}${provenance.runApprover === undefined ? '' : `, approved by ${provenance.runApprover}`}`,
    `- Push requested by: ${provenance.pushRequester}, approved by ${provenance.pushApprover}`,
    `- Created: ${meta.createdAt}; started: ${meta.startedAt ?? '—'}; ended: ${meta.endedAt ?? '—'}; pushed: ${provenance.pushedAt}`,
    ...(provenance.revisions ?? []).map((line) => `- ${line}`),
  ];
}

function environmentLines(record: LaunchRecord): string[] {
  const environment = record.environment;
  if (environment === undefined) return [`- Environment: ${record.environmentNote ?? 'not probed'}`];
  const torch =
    environment.torch === undefined
      ? 'not importable'
      : `${environment.torch}${environment.torchCuda === undefined ? '' : ` (built for CUDA ${environment.torchCuda})`}`;
  return [
    `- Python: ${environment.python ?? 'not recorded'}`,
    `- torch: ${torch}`,
    `- CUDA: ${environment.cuda ?? 'not recorded (no nvidia-smi)'}`,
    `- Driver: ${environment.driver ?? 'not recorded (no nvidia-smi)'}`,
  ];
}

/** `pip freeze` in full, folded so the card stays readable. */
function freezeBlock(record: LaunchRecord): string[] {
  const freeze = record.environment?.pipFreeze;
  if (freeze === undefined) {
    const reason = record.environment?.errors.pipFreeze;
    return record.environment === undefined
      ? []
      : ['', `pip freeze: not available (${reason ?? 'no answer'})`];
  }
  return [
    '',
    '<details>',
    `<summary>pip freeze (${freeze.length} packages)</summary>`,
    '',
    '```text',
    ...freeze,
    '```',
    '',
    '</details>',
  ];
}

/** What it takes to reproduce the run: the newest launch's record, as `status <run> --full` shows it. */
function reproducibilityLines(record: LaunchRecord | undefined): string[] {
  if (record === undefined) return ['No launch record (the run predates them).'];
  const args =
    record.args === undefined || record.args.length === 0 ? 'none' : `\`${record.args.join(' ')}\``;
  const git =
    record.git === undefined
      ? 'not a git checkout'
      : `${record.git.commit}${record.git.dirty ? ' (dirty working tree; the diff is on the launch record)' : ' (clean)'}`;
  return [
    `- Launch ${record.launch} on ${record.backend}, recorded ${record.recordedAt}`,
    `- Launch command: \`${record.command.join(' ')}\``,
    `- Arguments: ${args}`,
    `- Seed: ${record.seed ?? 'none passed'}`,
    `- Git at launch: ${git}`,
    ...environmentLines(record),
    ...freezeBlock(record),
  ];
}

export function modelCardReadme(meta: RunMeta, summary: ModelSummary, provenance: ModelProvenance): string {
  const evaluation = evalLine(summary);
  return [
    ...metadataBlock(meta),
    '',
    `# ${meta.name}`,
    '',
    `Trained and published with Shepherd (run \`${meta.id}\`).${evaluation === undefined ? '' : ` Evaluation: ${evaluation}.`}`,
    '',
    '## Metrics',
    '',
    ...metricsTable(summary),
    '',
    '## Training configuration',
    '',
    ...trainingLines(meta, summary),
    '',
    '## Provenance',
    '',
    ...provenanceLines(meta, provenance),
    '',
    '## Reproducibility',
    '',
    ...reproducibilityLines(provenance.launch),
    '',
  ].join('\n');
}
