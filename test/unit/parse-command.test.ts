import { describe, expect, it } from 'vitest';
import { parsePlainCommand, stripLeadingMention } from '../../src/commands/parse-command.js';

describe('plain commands', () => {
  it('parses the command set after a mention', () => {
    expect(parsePlainCommand('@shepherd help')).toEqual({ name: 'help' });
    expect(parsePlainCommand('<@U123ABC> runs')).toEqual({ name: 'runs' });
    expect(parsePlainCommand('@shepherd pause qwen-gsm8k-sft')).toEqual({
      name: 'pause',
      run: 'qwen-gsm8k-sft',
    });
    expect(parsePlainCommand('status r-1130-ab12')).toEqual({ name: 'status', run: 'r-1130-ab12' });
    expect(parsePlainCommand('@shepherd run examples/tiny_train.py --gpus 0')).toEqual({
      name: 'run',
      path: 'examples/tiny_train.py',
      gpus: 0,
    });
    expect(parsePlainCommand('run train.py --gpus=2 --name qwen --hours 3')).toEqual({
      name: 'run',
      path: 'train.py',
      gpus: 2,
      runName: 'qwen',
      maxHours: 3,
    });
    expect(parsePlainCommand('chart qwen-gsm8k-sft loss --steps 1000..2000')).toEqual({
      name: 'chart',
      run: 'qwen-gsm8k-sft',
      metrics: ['loss'],
      steps: { from: 1000, to: 2000 },
    });
  });

  it('leaves natural language to the agent', () => {
    expect(parsePlainCommand('@shepherd how is it going?')).toBeUndefined();
    expect(parsePlainCommand('stop the run if the loss explodes')).toBeUndefined();
    expect(parsePlainCommand('run the eval again please')).toBeUndefined();
    expect(parsePlainCommand('help me write a script')).toBeUndefined();
    expect(parsePlainCommand('')).toBeUndefined();
  });

  it('reports bad options instead of guessing', () => {
    expect(parsePlainCommand('run train.py --gpus two')).toMatchObject({ name: 'invalid', command: 'run' });
    expect(parsePlainCommand('run train.py --fast')).toMatchObject({ name: 'invalid' });
    expect(parsePlainCommand('chart r1 --steps 5..1')).toMatchObject({ name: 'invalid', command: 'chart' });
  });

  it('strips only our own mention', () => {
    expect(stripLeadingMention('@shepherd  runs', 'shepherd')).toBe('runs');
    expect(stripLeadingMention('@bob runs', 'shepherd')).toBe('@bob runs');
  });
});
