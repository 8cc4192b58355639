import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LlmProvider } from './agent/llm-provider.js';
import type { ActionRouter } from './bot/inbound.js';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import type { InboxItem } from './queue/turn-inbox.js';
import type { Notifier } from './notify/notifier.js';
import { createHelpTool } from './tools/help-tool.js';
import { createToolRegistry, type ToolRegistry } from './tools/registry.js';
import { parsePlainCommand } from './commands/parse-command.js';

export interface FeatureDependencies {
  config: Config;
  logger: Logger;
  redis: Redis;
  prefix: string;
  notifier: Notifier;
  actions: ActionRouter;
  pushEvent(threadId: string, eventId: string, text: string): Promise<void>;
  provider: LlmProvider;
}

export interface Features {
  tools: ToolRegistry;
  commands: {
    tryHandle(threadId: string, item: Extract<InboxItem, { type: 'message' }>): Promise<string | undefined>;
  };
  startWorkers(): Promise<Worker[]>;
  stop(): Promise<void>;
}

/** Composes the product features (runs, approvals, monitoring) on top of the spine. */
export function createFeatures(dependencies: FeatureDependencies): Features {
  const { config } = dependencies;
  const help = createHelpTool({ botName: config.botName });
  const tools = createToolRegistry([help]);
  return {
    tools,
    commands: {
      async tryHandle(_threadId, item) {
        const command = parsePlainCommand(item.text, config.botName);
        if (command === undefined) return undefined;
        if (command.name === 'help') return String(await help.execute({}, { threadId: _threadId, actor: item.user }));
        return undefined;
      },
    },
    async startWorkers() {
      return [];
    },
    async stop() {},
  };
}
