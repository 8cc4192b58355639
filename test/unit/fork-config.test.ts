import { describe, expect, it } from 'vitest';
import { RunError } from '../../src/errors.js';
import { applySettings, parseSetting } from '../../src/runs/operations/fork-config.js';

describe('fork --set: where each setting lands', () => {
  it('changes a script run’s config, typed as the text reads', () => {
    const result = applySettings({ config: { lr: 0.001, tag: 'a' } }, [
      { key: 'lr', value: '5e-4' },
      { key: 'warmup', value: 'true' },
      { key: 'tag', value: 'b' },
    ]);
    expect(result.config).toEqual({ lr: 0.0005, warmup: true, tag: 'b' });
    expect(result.changes).toEqual(['lr: 0.001 → 0.0005', 'warmup: (unset) → true', 'tag: a → b']);
  });

  it('replaces a flag the arguments already pass, in both spellings, and appends one a command lacks', () => {
    expect(applySettings({ args: ['--lr=0.1', '--epochs', '3'] }, [{ key: 'epochs', value: '5' }])).toEqual({
      args: ['--lr=0.1', '--epochs', '5'],
      changes: ['--epochs: 3 → 5'],
    });
    expect(
      applySettings({ command: ['python', 'train.py', '--lr=0.1'] }, [
        { key: 'lr', value: '0.2' },
        { key: 'seed', value: '7' },
      ]),
    ).toEqual({
      command: ['python', 'train.py', '--lr=0.2', '--seed', '7'],
      changes: ['--lr: 0.1 → 0.2', '--seed: (unset) → 7'],
    });
  });

  it('refuses a key given twice and malformed settings', () => {
    expect(() =>
      applySettings({}, [
        { key: 'lr', value: '1' },
        { key: 'lr', value: '2' },
      ]),
    ).toThrow(RunError);
    expect(parseSetting('lr')).toBe('--set takes key=value, got "lr"');
    expect(parseSetting('lr=')).toBe('--set lr= needs a value');
    expect(parseSetting('1x=2')).toMatch(/may use letters/);
    expect(parseSetting('lr=3e-4')).toEqual({ key: 'lr', value: '3e-4' });
  });
});
