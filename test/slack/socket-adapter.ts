import type { InboundHandlers } from '../../src/bot/chat-adapter.js';
import { createSlackAdapter, type SlackAdapter } from '../../src/bot/slack/slack-adapter.js';
import { createLogger } from '../../src/logger.js';
import type { SlackEmulator } from './emulator/index.js';

/** The real Slack adapter (Bolt in Socket Mode) started against the emulator, connected when it returns. */
export async function startSocketModeAdapter(
  emulator: SlackEmulator,
  handlers: InboundHandlers,
): Promise<SlackAdapter> {
  const adapter = createSlackAdapter({
    botToken: emulator.botToken,
    appToken: emulator.appToken,
    apiUrl: emulator.apiUrl,
    allowBots: false,
    botName: 'shepherd',
    logger: createLogger('silent'),
  });
  await adapter.start(handlers);
  await emulator.waitForSocket();
  return adapter;
}
