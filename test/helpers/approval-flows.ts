import { readFileSync } from 'node:fs';
import { type PlaygroundMessage, startTestApp, type TestApp } from './app-harness.js';
import { cardsTitled } from './flow.js';
import { type ScriptedLlmServer, type Step, startScriptedOpenAi } from './scripted-llm/index.js';

/**
 * What the playground approval flows (reject with a reason, edit then approve) share: an app whose agent
 * answers from a queue the test fills, and the agent's request for a 2-GPU launch that puts an approval
 * card in a new thread. Each flow brings its own environment.
 */
export interface ScriptedAgentApp {
  llm: ScriptedLlmServer;
  shepherd: TestApp;
  /** The agent's next answers, in order; `ok` once empty. */
  agentSteps: Step[];
  stop(): Promise<void>;
}

export async function startScriptedAgentApp(environment: Record<string, string>): Promise<ScriptedAgentApp> {
  const agentSteps: Step[] = [];
  const llm = await startScriptedOpenAi();
  llm.setHandler(() => agentSteps.shift() ?? { text: 'ok' });
  const shepherd = await startTestApp({
    environment: { SHEPHERD_LLM_BASE_URL: llm.url, SHEPHERD_WORKSPACE: process.cwd(), ...environment },
  }).catch(async (error: unknown) => {
    await llm.close();
    throw error;
  });
  return {
    llm,
    shepherd,
    agentSteps,
    async stop() {
      await shepherd.stop();
      await llm.close();
    },
  };
}

/**
 * Alice asks for a launch on both GPUs; the agent calls `start_training` for `name` with the healthy
 * fixture (2 GPUs, 1 hour). Resolves with the thread, its approval card and the script.
 */
export async function agentLaunchCard(
  app: ScriptedAgentApp,
  name: string,
): Promise<{ threadId: string; card: PlaygroundMessage | undefined; script: string }> {
  const script = readFileSync('test/fixtures/healthy_train.py', 'utf8');
  app.agentSteps.push(
    { toolCalls: [{ name: 'start_training', arguments: { name, script, gpus: 2, max_hours: 1 } }] },
    { text: 'card posted' },
  );
  const threadId = await app.shepherd.mention('launch it on both GPUs', 'alice');
  const messages = await app.shepherd.waitForMessages(threadId, (all) => cardsTitled(all, name).length > 0);
  return { threadId, card: cardsTitled(messages, name)[0], script };
}
