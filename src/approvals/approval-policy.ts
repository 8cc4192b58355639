import { isApprover } from '../bot/approvers.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import type { Approval } from './approval-store.js';

export interface ApprovalPolicy {
  /** User ids (optionally `platform:`-prefixed) allowed to approve; empty means anyone in the channel. */
  approvers: readonly string[];
  /** Whether the requester may approve their own job. */
  selfApproval: boolean;
  /** Jobs estimated at or under this cost are approved automatically; 0 turns it off. */
  autoApproveUsd: number;
}

type PolicyVerdict = { allowed: true } | { allowed: false; reason: string };

/** Who may decide: approvers approve or reject; the requester may always withdraw (reject) their own job. */
export function checkDecision(
  policy: ApprovalPolicy,
  approval: Approval,
  user: ChatUser,
  decision: 'approved' | 'rejected',
): PolicyVerdict {
  const isRequester = user.id === approval.requester.id;
  if (decision === 'rejected' && isRequester) return { allowed: true };
  if (policy.approvers.length > 0 && !isApprover(policy.approvers, approval.threadId, user)) {
    return {
      allowed: false,
      reason: `only approvers (${policy.approvers.join(', ')}) can ${decision === 'approved' ? 'approve' : 'reject'} this job`,
    };
  }
  if (decision === 'approved' && isRequester && !policy.selfApproval) {
    return { allowed: false, reason: 'team policy: you cannot approve your own job — ask a teammate' };
  }
  return { allowed: true };
}

export function isAutoApproved(
  policy: ApprovalPolicy,
  costUsd: number,
  budget?: { limitUsd: number; leftUsd: number },
): boolean {
  // A job that would pass the monthly budget always needs a person, whatever its size.
  if (budget !== undefined && costUsd > budget.leftUsd) return false;
  return policy.autoApproveUsd > 0 && costUsd <= policy.autoApproveUsd;
}
