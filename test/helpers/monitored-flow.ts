import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp, type TestApp } from './app-harness.js';
import { uniquePrefix } from './redis.js';
import { startScriptedOpenAi } from './scripted-llm/index.js';

/**
 * What the flows about a run's own metrics and alerts share (TensorBoard event files, an MLflow store,
 * `--logdir`, `shepherd.alert`): a whole app over a fresh workspace holding the scripts, its monitor
 * ticking every 0.25 s, bob the approver, and an LLM that is never useful (plain commands only).
 */
export interface MonitoredFlow {
  shepherd: TestApp;
  /** `SHEPHERD_WORKSPACE`: `<root>/workspace`. */
  workspace: string;
  /** A fresh temporary folder around the workspace, for what a test puts outside it. */
  root: string;
  stop(): Promise<void>;
}

/** Starts the app; `files(workspace)` names the files to write into the workspace, by name. */
export async function startMonitoredFlow(
  label: string,
  files: (workspace: string) => Record<string, string>,
): Promise<MonitoredFlow> {
  const llm = await startScriptedOpenAi({ fallback: { text: 'not json at all' } });
  const root = mkdtempSync(join(tmpdir(), `shepherd-${label}-`));
  const workspace = join(root, 'workspace');
  mkdirSync(workspace);
  for (const [name, text] of Object.entries(files(workspace))) writeFileSync(join(workspace, name), text);
  const shepherd = await startTestApp({
    prefix: uniquePrefix(label),
    environment: {
      SHEPHERD_LLM_BASE_URL: llm.url,
      SHEPHERD_WORKSPACE: workspace,
      SHEPHERD_MONITOR_INTERVAL_S: '0.25',
      SHEPHERD_APPROVERS: 'bob',
    },
  });
  return {
    shepherd,
    workspace,
    root,
    async stop() {
      // The harness ends the runs it launched and deletes its Redis keys.
      await shepherd.stop();
      await llm.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
