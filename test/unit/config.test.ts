import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';

describe('config', () => {
  it('has embedded defaults for every variable', () => {
    const config = loadConfig({});
    expect(config.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(config.queuePrefix).toBe('shepherd');
    expect(config.port).toBe(3000);
    expect(config.host).toBe('127.0.0.1');
    expect(config.llm).toMatchObject({
      provider: 'openai',
      baseUrl: 'http://localhost:11434/v1',
      model: 'qwen3.5',
      maxToolRounds: 10,
    });
    expect(config.runs.gpus).toBeUndefined();
    expect(Object.isFrozen(config.llm)).toBe(true);
  });

  it('names the bad variable in a readable error', () => {
    expect(() => loadConfig({ SHEPHERD_PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ SHEPHERD_PORT: 'eighty' })).toThrow(/SHEPHERD_PORT="eighty"/);
    expect(() => loadConfig({ SHEPHERD_LLM_PROVIDER: 'cohere' })).toThrow(/SHEPHERD_LLM_PROVIDER/);
    expect(() => loadConfig({ SHEPHERD_GPUS: '0,x' })).toThrow(/SHEPHERD_GPUS/);
  });

  it('reads GPU counts and index lists', () => {
    expect(loadConfig({ SHEPHERD_GPUS: '4' }).runs.gpus).toEqual([0, 1, 2, 3]);
    expect(loadConfig({ SHEPHERD_GPUS: '3, 1,1' }).runs.gpus).toEqual([1, 3]);
    expect(loadConfig({ SHEPHERD_APPROVERS: 'bob, carol' }).approvals.approvers).toEqual(['bob', 'carol']);
    expect(loadConfig({ SHEPHERD_SELF_APPROVAL: 'false' }).approvals.selfApproval).toBe(false);
  });
});
