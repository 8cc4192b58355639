import { isApprover, platformOfThread } from '../../bot/approvers.js';
import type { ChatUser } from '../../bot/chat-adapter.js';
import { ToolPolicyError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { AuditLog } from '../records/audit-log.js';
import type { RunMeta } from '../records/run-types.js';

/*
 * Who may change a run (pause, resume, stop, script edits, "fix" on an alert): its requester, or an
 * approver when approvers are configured; without approvers, anyone in the run's own thread. The same
 * check guards plain commands, agent tools and card buttons (also Fork and Compare on the model-ready
 * card), and every attempt is audited.
 */

export type RunChange = 'pause' | 'resume' | 'stop' | 'update_script' | 'fix' | 'fork' | 'compare';

/** Where the attempt came from, for the audit trail. */
export type RunChangeVia = 'command' | 'agent' | 'button';

export class RunAccessError extends ToolPolicyError {
  constructor(message: string) {
    super('run_change_forbidden', message);
    this.name = 'RunAccessError';
  }
}

interface RunAccessOptions {
  /** `SHEPHERD_APPROVERS`. */
  approvers: readonly string[];
  audit: AuditLog;
  logger: Logger;
  now?: () => Date;
}

const VERBS: Record<RunChange, string> = {
  pause: 'pause',
  resume: 'resume',
  stop: 'stop',
  update_script: 'change the script of',
  fix: 'ask for a fix of',
  fork: 'fork',
  compare: 'compare',
};

export function createRunAccess(options: RunAccessOptions) {
  const now = options.now ?? (() => new Date());

  function verdict(meta: RunMeta, actor: ChatUser, threadId: string): { allowed: boolean; reason: string } {
    const platform = platformOfThread(threadId);
    const samePlatform = platform !== undefined && platform === platformOfThread(meta.threadId);
    if (samePlatform && actor.id === meta.requester.id) return { allowed: true, reason: 'requester' };
    if (options.approvers.length > 0) {
      return isApprover(options.approvers, threadId, actor)
        ? { allowed: true, reason: 'approver' }
        : { allowed: false, reason: 'not the requester or an approver' };
    }
    return threadId === meta.threadId
      ? { allowed: true, reason: 'in the run thread' }
      : { allowed: false, reason: 'not in the run thread' };
  }

  /** Throws `RunAccessError` (a sentence for the person) unless `actor` may make `change`; audits either way. */
  async function authorize(
    meta: RunMeta,
    actor: ChatUser,
    threadId: string,
    change: RunChange,
    via: RunChangeVia,
  ): Promise<void> {
    const result = verdict(meta, actor, threadId);
    await options.audit
      .recordAttempt({
        kind: 'attempt',
        ts: now().toISOString(),
        runId: meta.id,
        action: change,
        by: { id: actor.id, name: actor.name },
        threadId,
        via,
        allowed: result.allowed,
        reason: result.reason,
      })
      .catch((error: unknown) =>
        options.logger.error({ runId: meta.id, err: error }, 'could not audit a run change attempt'),
      );
    if (result.allowed) return;
    options.logger.info(
      { runId: meta.id, change, user: actor.id, threadId, via },
      'run change refused: not the requester or an approver',
    );
    const verb = VERBS[change];
    throw new RunAccessError(
      options.approvers.length > 0
        ? `Only ${meta.requester.name} (who started ${meta.name}) or an approver can ${verb} ${meta.name}.`
        : `Only ${meta.requester.name} (who started ${meta.name}) or someone in its own thread can ${verb} ${meta.name}; ask there.`,
    );
  }

  /** `authorize` for a button: the refusal sentence, or undefined when the click may count. */
  async function refusal(
    meta: RunMeta,
    actor: ChatUser,
    threadId: string,
    change: RunChange,
    via: RunChangeVia,
  ): Promise<string | undefined> {
    try {
      await authorize(meta, actor, threadId, change, via);
      return undefined;
    } catch (error) {
      if (error instanceof RunAccessError) return error.message;
      throw error;
    }
  }

  /** The same rule, unaudited: whether to show `actor` a form that would lead to a change. */
  function mayChange(meta: RunMeta, actor: ChatUser, threadId: string): boolean {
    return verdict(meta, actor, threadId).allowed;
  }

  return { authorize, refusal, mayChange };
}

export type RunAccess = ReturnType<typeof createRunAccess>;
