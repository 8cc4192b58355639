import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveWorkspaceScript } from '../../src/runs/launch/workspace-script.js';

describe('workspace scripts', () => {
  const root = mkdtempSync(join(tmpdir(), 'shepherd-ws-'));
  const workspace = join(root, 'workspace');
  const outside = join(root, 'outside');
  mkdirSync(join(workspace, 'jobs'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(workspace, 'jobs', 'train.py'), 'print(1)\n');
  writeFileSync(join(outside, 'secret.py'), 'print(2)\n');
  symlinkSync(join(outside, 'secret.py'), join(workspace, 'link.py'));
  symlinkSync(outside, join(workspace, 'linked-dir'));
  symlinkSync(join(workspace, 'jobs', 'train.py'), join(workspace, 'inside-link.py'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('resolves scripts inside the workspace, also through symlinks that stay inside', async () => {
    expect(await resolveWorkspaceScript(workspace, 'jobs/train.py')).toBe(
      join(workspace, 'jobs', 'train.py'),
    );
    expect(await resolveWorkspaceScript(workspace, 'inside-link.py')).toBe(
      join(workspace, 'jobs', 'train.py'),
    );
    expect(await resolveWorkspaceScript(workspace, join(workspace, 'jobs', 'train.py'))).toBe(
      join(workspace, 'jobs', 'train.py'),
    );
  });

  it('refuses .., absolute paths outside, and symlinks that lead out', async () => {
    await expect(resolveWorkspaceScript(workspace, '../outside/secret.py')).rejects.toThrow(
      /outside the workspace/,
    );
    await expect(resolveWorkspaceScript(workspace, join(outside, 'secret.py'))).rejects.toThrow(
      /outside the workspace/,
    );
    await expect(resolveWorkspaceScript(workspace, 'link.py')).rejects.toThrow(/symlink/);
    await expect(resolveWorkspaceScript(workspace, 'linked-dir/secret.py')).rejects.toThrow(/symlink/);
    await expect(resolveWorkspaceScript(workspace, 'missing.py')).rejects.toThrow(/no script/);
  });
});
