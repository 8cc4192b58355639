import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { TestApp } from './app-harness.js';

/**
 * Shared checks of the edit-then-approve flows (playground, Slack, Discord): the run launched under its
 * edited name with the edited GPUs, hours and script version, and its audit trail holds the edit with the
 * values before and after.
 */
export async function expectEditedRun(
  shepherd: TestApp,
  expected: {
    name: string;
    gpus: number;
    maxHours: number;
    before: { gpus: number; maxHours: number; name: string };
    by: string;
    /** A line only the edited script has. */
    scriptLine?: string;
    /** The run's status when the card was edited (a script change's run may be failed or running). */
    editedWhile?: string;
  },
): Promise<void> {
  const runs = shepherd.app.features.runs;
  const deadline = Date.now() + 20_000;
  let meta = await runs.find(expected.name);
  // Launched: running, or already finished (the fixture is short).
  while (!['running', 'completed'].includes(meta.status) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    meta = await runs.find(expected.name);
  }
  expect(meta.status).toMatch(/^(running|completed)$/);
  expect(meta.name).toBe(expected.name);
  expect(meta.gpus).toBe(expected.gpus);
  expect(meta.maxHours).toBe(expected.maxHours);
  if (expected.scriptLine !== undefined) {
    expect(meta.scriptVersion).toBe(2);
    expect(await runs.readScript(meta.id)).toContain(expected.scriptLine);
  }
  const audit = readFileSync(join(runs.runDirectory(meta.id), 'audit.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const edit = audit.find((entry) => entry.edit !== undefined);
  const editedWhile = expected.editedWhile ?? 'pending_approval';
  expect(edit).toMatchObject({
    from: editedWhile,
    to: editedWhile,
    by: { name: expected.by },
    edit: {
      before: expected.before,
      after: { gpus: expected.gpus, maxHours: expected.maxHours, name: expected.name },
    },
  });
  // The edit comes before the approval (or the restart with the new script) that launched the run.
  const launched = audit
    .slice(audit.indexOf(edit ?? {}) + 1)
    .some(
      (entry) => entry.reason === 'approved' || String(entry.reason).startsWith('restart with script v2'),
    );
  expect(launched).toBe(true);
}
