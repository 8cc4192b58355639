import { describe, expect, it } from 'vitest';
import { checkPythonSyntax, parseTriageAnswer, triage } from '../../src/monitor/alerts/triage.js';
import type { TriageSnapshot } from '../../src/monitor/triage-snapshot.js';

const snapshot: TriageSnapshot = {
  run: { id: 'r1', name: 'qwen', status: 'running', scriptVersion: 1, launchCount: 1, gpus: 1 },
  process: 'exited with code 1',
  metrics: [],
  logTail: 'boom',
  script: 'print("hi")',
};

function scripted(answers: string[]) {
  const prompts: string[] = [];
  return {
    prompts,
    ask: async (prompt: string) => {
      prompts.push(prompt);
      return answers.shift() ?? '';
    },
  };
}

describe('parseTriageAnswer', () => {
  it('accepts the JSON alone or in one ```json fence, nothing else', () => {
    const json = '{"decision": "LGTM", "diagnosis": "fine"}';
    expect(parseTriageAnswer(json).ok).toBe(true);
    expect(parseTriageAnswer(`\`\`\`json\n${json}\n\`\`\``).ok).toBe(true);
    expect(parseTriageAnswer(`<think>hmm</think>\n${json}`).ok).toBe(true);
    expect(parseTriageAnswer(`Sure! ${json}`).ok).toBe(false);
    expect(parseTriageAnswer(`\`\`\`python\nprint(1)\n\`\`\``).ok).toBe(false);
    expect(parseTriageAnswer('{"decision": "MAYBE", "diagnosis": "x"}').ok).toBe(false);
    expect(parseTriageAnswer('{"decision": "LGTM", "diagnosis": "x", "extra": 1}').ok).toBe(false);
    expect(parseTriageAnswer(`\`\`\`json\n${json}\n\`\`\`\n\`\`\`json\n${json}\n\`\`\``).ok).toBe(false);
  });
});

describe('triage', () => {
  it('garbage twice → WARNING, unparsed, exactly two calls', async () => {
    const llm = scripted(['I think you should lower the LR', '```python\nimport torch\nlr = 1e-5\n```']);
    const result = await triage({
      ask: llm.ask,
      snapshot,
      template: 'T {{snapshot}}',
    });
    expect(result).toMatchObject({ decision: 'WARNING', parsed: false, attempts: 2 });
    expect(result.diagnosis).toContain('could not be parsed');
    expect('script' in result).toBe(false);
    expect(llm.prompts).toHaveLength(2);
    expect(llm.prompts[1]).toContain('ONLY one JSON object');
  });

  it('retries once, then takes a valid FIX with its script', async () => {
    const llm = scripted([
      'Here is a fix:\n```python\nprint(1)\n```',
      JSON.stringify({ decision: 'FIX', diagnosis: 'batch too large', script: 'batch_size = 8\n' }),
    ]);
    const result = await triage({ ask: llm.ask, snapshot, template: '{{snapshot}}' });
    expect(result).toEqual({
      decision: 'FIX',
      diagnosis: 'batch too large',
      script: 'batch_size = 8\n',
      parsed: true,
      attempts: 2,
    });
  });

  it('FIX without a script is a WARNING; LGTM passes through; the default prompt file loads', async () => {
    const fix = await triage({
      ask: scripted(['{"decision": "FIX", "diagnosis": "lower lr"}']).ask,
      snapshot,
    });
    expect(fix).toMatchObject({ decision: 'WARNING', parsed: true });
    const llm = scripted(['```json\n{"decision": "LGTM", "diagnosis": "harmless spike"}\n```']);
    const ok = await triage({ ask: llm.ask, snapshot });
    expect(ok).toEqual({ decision: 'LGTM', diagnosis: 'harmless spike', parsed: true, attempts: 1 });
    expect(llm.prompts[0]).toContain('Run: qwen (id r1)');
    expect(llm.prompts[0]).toContain('"decision"');
  });
});

describe('checkPythonSyntax', () => {
  it('accepts valid code and returns the error for invalid code', async () => {
    expect(await checkPythonSyntax('x = 1\nprint(x)\n')).toEqual({ ok: true });
    const bad = await checkPythonSyntax('def f(:\n  pass\n');
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.error).toContain('SyntaxError');
      expect(bad.error).toContain('train.py');
    }
  });
});
