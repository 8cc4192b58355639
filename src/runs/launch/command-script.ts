import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { RunError } from '../../errors.js';
import { writeFileAtomic } from '../records/atomic-file.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';

/**
 * Script edits for runs that are not a plain `train.py`. A command run edits the `.py` file its command
 * names, in the workspace; the run directory keeps the versions (`train.py` = current, `train_vN.py` =
 * archived), so the usual diff, approval and archive apply. A watched run is not ours to edit.
 */

export function refuseScriptEdit(meta: RunMeta): void {
  if (meta.watch !== undefined) {
    throw new RunError(
      'watched_run',
      `${meta.name} is a watched run: Shepherd did not launch it, so it does not change its script or relaunch it`,
    );
  }
  if (meta.command !== undefined && meta.scriptPath === undefined) {
    throw new RunError(
      'no_script',
      `${meta.name} runs \`${meta.command.join(' ')}\`, which names no .py file Shepherd could edit; change the files in the workspace and launch again`,
    );
  }
}

/** Before an edit: the run directory's `train.py` takes the workspace file's current text (what gets archived). */
export async function syncWorkspaceScript(meta: RunMeta, runDir: string): Promise<void> {
  if (meta.scriptPath === undefined) return;
  const current = await readFile(meta.scriptPath, 'utf8');
  await writeFileAtomic(path.join(runDir, RUN_FILES.script), current);
}

/** After an approved edit: the workspace file gets the new source (the command runs it from there). */
export async function writeWorkspaceScript(meta: RunMeta, source: string): Promise<void> {
  if (meta.scriptPath === undefined) return;
  await writeFileAtomic(meta.scriptPath, source);
}
