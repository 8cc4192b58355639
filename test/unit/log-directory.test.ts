import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveLogDirectory } from '../../src/runs/launch/command-launch.js';

/* `run --logdir DIR`: a directory inside the workspace, symlinks resolved; it may not exist yet. */

describe('--logdir', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'shepherd-logdir-')));
  const workspace = join(root, 'workspace');
  const outside = join(root, 'outside');
  mkdirSync(join(workspace, 'exp', 'tb'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(workspace, 'notes.txt'), 'x\n');
  symlinkSync(outside, join(workspace, 'escape'));
  symlinkSync(join(workspace, 'exp'), join(workspace, 'exp-link'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('resolves inside the workspace, relative to --cwd, through inside symlinks, and not yet made', async () => {
    expect(await resolveLogDirectory(workspace, 'exp/tb')).toBe(join(workspace, 'exp', 'tb'));
    expect(await resolveLogDirectory(workspace, 'tb', 'exp')).toBe(join(workspace, 'exp', 'tb'));
    expect(await resolveLogDirectory(workspace, 'exp-link/tb')).toBe(join(workspace, 'exp', 'tb'));
    expect(await resolveLogDirectory(workspace, 'runs/exp1')).toBe(join(workspace, 'runs', 'exp1'));
    expect(await resolveLogDirectory(workspace, '.')).toBe(workspace);
  });

  it('refuses .., absolute paths outside, symlinks that lead out (made or not) and files', async () => {
    for (const logdir of ['../outside', outside, 'escape', 'escape/tb', '/'])
      await expect(resolveLogDirectory(workspace, logdir)).rejects.toThrow(/outside the workspace.*refused/);
    await expect(resolveLogDirectory(workspace, 'notes.txt')).rejects.toThrow(/is a file/);
  });
});
