/**
 * The runs as chat surfaces list them (Discord's autocomplete, Slack's App Home): a port of its own, so the
 * chat port (`chat-adapter.ts`) speaks only messages, cards, actions and forms. Implemented in
 * src/runs/runs-directory.ts and handed to each surface through its own options.
 */

import type { ChatUser } from './chat-adapter.js';

/** A run as chat surfaces list it. */
export interface RunOverview {
  id: string;
  name: string;
  status: string;
  gpus: number;
  step?: number;
  /** The last value of the run's loss metric, when it logs one. */
  loss?: number;
  threadId: string;
  createdAt: string;
}

export type RunControl = 'pause' | 'resume' | 'stop';

export interface RunsDirectory {
  /** Newest first. */
  list(): Promise<RunOverview[]>;
  /**
   * The chat operation as if `actor` typed it in `threadId`, under the same permissions (run-access.ts);
   * resolves to a sentence for the person, rejects with the refusal (a `ToolPolicyError`) otherwise.
   */
  change(change: RunControl, runId: string, actor: ChatUser, threadId: string): Promise<string>;
}
