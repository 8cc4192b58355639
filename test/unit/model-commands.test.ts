import { describe, expect, it } from 'vitest';
import { parsePlainCommand } from '../../src/commands/parse-command.js';
import { parsePushCommand } from '../../src/hub/push-command.js';
import { parseSweepTokens } from '../../src/sweeps/sweep-grid.js';

describe('--eval and push commands', () => {
  it('takes a quoted --eval command on run, before the command or after a script', () => {
    expect(
      parsePlainCommand('@shepherd run --name a --eval "python eval.py --split test" -- python train.py'),
    ).toEqual({
      name: 'run',
      command: ['python', 'train.py'],
      runName: 'a',
      evalCommand: 'python eval.py --split test',
    });
    expect(parsePlainCommand("run train.py --eval 'python e.py'")).toEqual({
      name: 'run',
      path: 'train.py',
      evalCommand: 'python e.py',
    });
    expect(parsePlainCommand('run train.py --eval "python e.py')).toEqual({
      name: 'invalid',
      command: 'run',
      error: 'unbalanced quote in the options',
    });
  });

  it('takes --eval on a sweep', () => {
    const parsed = parseSweepTokens(['train.py', '--grid', 'lr=1,2', '--eval', 'python eval.py']);
    expect(parsed).toMatchObject({ spec: { evalCommand: 'python eval.py' } });
  });

  it('parses push with its repo and visibility, and leaves sentences to the agent', () => {
    expect(parsePushCommand('@shepherd push tiny-sft', 'shepherd')).toEqual({
      kind: 'push',
      run: 'tiny-sft',
      public: false,
    });
    expect(parsePushCommand('push tiny-sft --repo org/name --public', 'shepherd')).toEqual({
      kind: 'push',
      run: 'tiny-sft',
      repo: 'org/name',
      public: true,
    });
    expect(parsePushCommand('push tiny-sft --repo', 'shepherd')).toMatchObject({ kind: 'invalid' });
    expect(parsePushCommand('push tiny-sft --force', 'shepherd')).toMatchObject({ kind: 'invalid' });
    expect(parsePushCommand('push the model when it is done', 'shepherd')).toBeUndefined();
    expect(parsePushCommand('status tiny-sft', 'shepherd')).toBeUndefined();
  });
});
