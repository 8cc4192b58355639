import type { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from '../agent/llm-provider.js';
import type { ChatUser } from '../bot/chat-adapter.js';
import type { IdempotentNotifier } from '../bot/notifier.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import type { ActionFormProvider, ActionHandler } from '../queue/chat-intake.js';
import type { ControlHandlers } from '../queue/control-worker.js';
import type { ToolDefinition } from '../tools/registry.js';
import type { FeatureHooks } from './feature-hooks.js';

/**
 * What one product feature contributes on top of the spine; `src/app/features.ts` composes the lists.
 * The factories live in this folder (not beside each feature) because they wire several folders together
 * (a monitor feature needs tools/, tools/ needs monitor/): only `src/app/features.ts` imports them.
 */
export interface Feature {
  /** Button handlers by verb: the card builders' action-id constants (`APPROVAL_ACTIONS`, …). */
  actions: ReadonlyArray<{ verb: string; handler: ActionHandler; form?: ActionFormProvider }>;
  /** Control jobs this feature applies; handlers of one kind from several features run in order. */
  controlHandlers: ControlHandlers;
  /** Tools offered to the agent. */
  tools: ToolDefinition[];
  /** Started in order when the process runs workers; each may also prepare state (reconcile, schedules). */
  workers: ReadonlyArray<() => Promise<Worker[]>>;
  /** Plain commands answered without the LLM; undefined when the text is not one of them. */
  commands?: (threadId: string, text: string, actor: ChatUser) => Promise<string | undefined>;
  /** Stops what the feature runs beside its workers (schedulers). */
  close?: () => Promise<void>;
  /** What it does for the other features (run events, sweep cards, script checks): feature-hooks.ts. */
  hooks?: FeatureHooks;
}

/** The spine's pieces every feature may use. */
export interface FeatureBase {
  config: Config;
  logger: Logger;
  redis: Redis;
  prefix: string;
  notifier: IdempotentNotifier;
  controlQueue: Queue;
  provider: LlmProvider;
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  /** Environment inherited by training processes (main passes `process.env`). */
  runEnvironment: Readonly<Record<string, string | undefined>>;
}
