import type { RunService } from '../runs/lifecycle/run-service.js';
import type { RunMeta } from '../runs/records/run-types.js';
import type { Approval, Decision } from './approval-store.js';

/**
 * What a decided approval does to its run, sweep or schedule. An approval with edits first revises the run
 * (GPUs, hours, name: audited before → after) and its script (a new script version), then applies as usual,
 * so the run starts with the edited values; a recurring job's edit only changes the cron it is created with.
 */

interface ApprovalEffectOptions {
  runs: RunService;
  onSweepDecision?: ((approval: Approval, decision: Decision) => Promise<string>) | undefined;
  createSchedule?: ((runId: string, schedule: string) => Promise<string>) | undefined;
}

export function createApprovalEffects(options: ApprovalEffectOptions) {
  const { runs } = options;

  /** Applies an approval's edits to the run; returns the script to apply for a script change. */
  async function applyEdits(approval: Approval, decision: Decision): Promise<string | undefined> {
    const edits = decision.edits;
    if (edits === undefined) return approval.proposedScript;
    const why = `edited on the approval card by ${decision.user.name}`;
    await runs.revise(approval.runId, edits.after, decision.user, why);
    if (approval.kind === 'script-change') return edits.script ?? approval.proposedScript;
    if (edits.script !== undefined) await runs.updateScript(approval.runId, edits.script, decision.user, why);
    return undefined;
  }

  async function applyScriptChange(approval: Approval, decision: Decision): Promise<string> {
    const script = await applyEdits(approval, decision);
    if (script === undefined) return 'no script was attached';
    const by = decision.user;
    // The audit's script entry says when the approver's text, not the proposal, became the new version.
    const edited = decision.edits?.script === undefined ? '' : ` (edited on the approval card by ${by.name})`;
    const reason = `${approval.reason ?? 'approved change'}${edited}`;
    const update = await runs.updateScript(approval.runId, script, by, reason);
    const status = update.meta.status;
    if (status === 'running' || status === 'failed' || status === 'queued') {
      const meta = await runs.restartWithCurrentScript(approval.runId, by);
      return `script v${update.meta.scriptVersion} applied (${update.archivedAs} archived); ${describeLaunch(meta)}`;
    }
    return `script v${update.meta.scriptVersion} applied (${update.archivedAs} archived); the run is ${status}`;
  }

  async function applyApproved(approval: Approval, decision: Decision): Promise<string> {
    switch (approval.kind) {
      case 'start': {
        await applyEdits(approval, decision);
        return describeLaunch(await runs.approve(approval.runId, decision.user));
      }
      case 'resume': {
        await applyEdits(approval, decision);
        return describeLaunch(await runs.resume(approval.runId, decision.user));
      }
      case 'script-change':
        return applyScriptChange(approval, decision);
      default:
        return 'nothing to apply';
    }
  }

  return async function applyToRun(approval: Approval, decision: Decision): Promise<string> {
    const by = decision.user;
    if (approval.kind === 'sweep') {
      if (options.onSweepDecision === undefined) return 'sweeps are not available here';
      return options.onSweepDecision(approval, decision);
    }
    if (approval.kind === 'schedule') {
      if (decision.decision !== 'approved') return 'nothing is scheduled';
      if (options.createSchedule === undefined || approval.schedule === undefined)
        return 'schedules are not available here';
      // An approval with edits creates the recurring job with the approver's cron.
      return options.createSchedule(approval.runId, decision.edits?.after.schedule ?? approval.schedule);
    }
    if (decision.decision === 'approved') return applyApproved(approval, decision);
    if (approval.kind === 'start') {
      const reason = decision.decision === 'expired' ? 'approval expired' : (decision.note ?? 'rejected');
      await runs.reject(approval.runId, by, reason);
      return 'the run will not start';
    }
    return approval.kind === 'resume' ? 'the run stays paused' : 'the script is unchanged';
  };
}

function describeLaunch(meta: RunMeta): string {
  if (meta.status === 'running') {
    const where =
      meta.gpuIndices.length > 0
        ? `GPUs ${meta.gpuIndices.join(',')}`
        : meta.jobId
          ? `job ${meta.jobId}`
          : 'CPU';
    return `run ${meta.name} started on ${where}`;
  }
  return `run ${meta.name} is ${meta.status}${meta.statusReason ? ` (${meta.statusReason})` : ''}`;
}
