import type { ChatUser } from '../../bot/chat-adapter.js';
import type { RunMeta } from '../records/run-types.js';

/**
 * What run actions ask of approvals. approvals/ sits on top of runs/ (it starts runs once approved), so
 * runs/ names only this much and the approval service fits it structurally.
 */

interface RunApprovalRequest {
  kind: 'start' | 'resume' | 'script-change' | 'schedule';
  /** `schedule`: the cron fields of the recurring job. */
  schedule?: string;
  meta: RunMeta;
  requester: ChatUser;
  /** Diff (script change) or the script (start / resume). */
  scriptExcerpt: string;
  proposedScript?: string;
  reason?: string;
  origin: 'agent' | 'command' | 'monitor';
  toolCall?: { name: string; input: unknown };
  /** The CPU pre-flight's line. */
  preflight?: string;
  /** The agent's memory estimate for this launch, when it made one. */
  memory?: string;
  /** Shown on the card: the exact command line, the environment, launch warnings. */
  command?: string;
  environment?: string;
  warnings?: string[];
  /** A fork: its configuration changes against its parent, one line each. */
  changes?: string[];
  /** The thread's last dataset format check (`inspect_dataset` with a method). */
  datasetCheck?: string;
}

export interface RunApprovals {
  request(
    request: RunApprovalRequest,
  ): Promise<{ approval: { id: string; costUsd: number }; autoApproved: boolean }>;
}
