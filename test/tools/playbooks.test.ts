import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createPlaybooks, defaultPlaybooksDir } from '../../src/tools/playbooks.js';

const STARTER = ['dpo', 'eval-held-out', 'fit-in-memory', 'lora-qlora-peft', 'multi-gpu', 'sft-trl'];

describe('playbooks', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'shepherd-playbooks-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('ships the starter set, each with a title, a use-when line and a minimal script that compiles', async () => {
    const playbooks = createPlaybooks({ directory: undefined });
    const entries = await playbooks.list();
    expect(entries.map((entry) => entry.name)).toEqual(STARTER);
    for (const entry of entries) {
      expect(entry.title.length).toBeGreaterThan(5);
      expect(entry.useWhen.length).toBeGreaterThan(20);
      const text = await playbooks.read(entry.name);
      const scripts = [...text.matchAll(/```python\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
      expect(scripts, entry.name).toHaveLength(1);
      const script = scripts[0] ?? '';
      // Every script reports through Shepherd: the helper or the Trainer callback.
      expect(script).toMatch(/\bshepherd\.(log_metrics|finish)\(|ShepherdCallback/);
      const file = join(scratch, `${entry.name}.py`);
      writeFileSync(file, script);
      // Throws with Python's message (and the line) when the script does not compile.
      execFileSync('python3', ['-m', 'py_compile', file], { stdio: 'pipe' });
    }
  });

  it('reads only listed names inside the directory', async () => {
    const directory = join(scratch, 'team');
    execFileSync('mkdir', ['-p', directory]);
    writeFileSync(join(directory, 'ours.md'), '# Our way\n\nUse when: always.\n');
    writeFileSync(join(scratch, 'secret.md'), '# Secret\n');
    symlinkSync(join(scratch, 'secret.md'), join(directory, 'escape.md'));
    const playbooks = createPlaybooks({ directory });
    expect(await playbooks.describe()).toContain('- `ours`: Our way — use when always.');
    expect(await playbooks.read('ours')).toContain('# Our way');
    await expect(playbooks.read('../secret')).rejects.toThrow(/no playbook named/);
    await expect(playbooks.read('/etc/passwd')).rejects.toThrow(/no playbook named/);
    await expect(playbooks.read('escape')).rejects.toThrow(/points outside the playbooks directory/);
    expect(defaultPlaybooksDir()).toMatch(/prompts[/\\]playbooks$/);
  });
});
