import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolPolicyError } from '../../src/errors.js';
import { createHelpTool } from '../../src/tools/help-tool.js';
import { createToolRegistry, defineTool, MAX_TOOL_RESULT_CHARS } from '../../src/tools/registry.js';

const context = { threadId: 'web:c:t', actor: { id: 'u1', name: 'alice' } };

const startTool = defineTool({
  name: 'start_training',
  description: 'Start a run.',
  input: z.object({
    name: z.string().min(1).describe('Run name'),
    gpus: z.number().int().positive().describe('GPU count'),
    max_hours: z.number().positive().default(24).describe('Time limit'),
  }),
  async execute(input, toolContext) {
    if (input.gpus > 8) throw new ToolPolicyError('gpu_limit', 'at most 8 GPUs per run');
    return { started: input.name, gpus: input.gpus, hours: input.max_hours, by: toolContext.actor.name };
  },
});

const bigTool = defineTool({
  name: 'big',
  description: 'Returns a lot.',
  input: z.object({}),
  async execute() {
    return 'x'.repeat(MAX_TOOL_RESULT_CHARS + 100);
  },
});

describe('tool registry', () => {
  const registry = createToolRegistry([startTool, bigTool, createHelpTool({ botName: 'shepherd' })]);

  it('publishes JSON schemas with descriptions, defaults optional', () => {
    const spec = registry.specs().find((item) => item.name === 'start_training');
    expect(spec?.description).toBe('Start a run.');
    expect(spec?.parameters).toMatchObject({
      type: 'object',
      properties: { name: { type: 'string', description: 'Run name' }, gpus: { type: 'integer' } },
      required: ['name', 'gpus'],
    });
    expect(spec?.parameters).not.toHaveProperty('$schema');
    expect(registry.specs().map((item) => item.name)).toEqual(['start_training', 'big', 'help']);
  });

  it('executes with parsed input (defaults applied) and the context', async () => {
    const result = await registry.execute(
      { id: '1', name: 'start_training', arguments: '{"name":"r","gpus":2}' },
      context,
    );
    expect(result).toEqual({ isError: false, content: '{"started":"r","gpus":2,"hours":24,"by":"alice"}' });
  });

  it('names every bad field', async () => {
    const result = await registry.execute(
      { id: '1', name: 'start_training', arguments: '{"gpus":"two"}' },
      context,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toContain('name:');
    expect(result.content).toContain('gpus:');
  });

  it('rejects invalid JSON and accepts empty arguments for parameterless tools', async () => {
    expect(
      (await registry.execute({ id: '1', name: 'start_training', arguments: '{name' }, context)).content,
    ).toMatch(/not valid JSON/);
    const help = await registry.execute({ id: '2', name: 'help', arguments: '' }, context);
    expect(help.isError).toBe(false);
    expect(help.content).toContain('pause');
  });

  it('returns policy refusals and unknown tools as error results', async () => {
    const refused = await registry.execute(
      { id: '1', name: 'start_training', arguments: '{"name":"r","gpus":16}' },
      context,
    );
    expect(refused).toEqual({ isError: true, content: 'Refused (gpu_limit): at most 8 GPUs per run' });
    const unknown = await registry.execute({ id: '2', name: 'nope', arguments: '{}' }, context);
    expect(unknown.content).toBe('Error: unknown tool "nope". Available tools: start_training, big, help.');
  });

  it('cuts huge results', async () => {
    const result = await registry.execute({ id: '1', name: 'big', arguments: '{}' }, context);
    expect(result.content.length).toBeLessThan(MAX_TOOL_RESULT_CHARS + 100);
    expect(result.content).toMatch(/cut: 100 more characters/);
  });

  it('refuses duplicate tool names', () => {
    expect(() => createToolRegistry([bigTool, bigTool])).toThrow(/duplicate/);
  });

  it('help answers a topic', async () => {
    const result = await registry.execute(
      { id: '1', name: 'help', arguments: '{"topic":"commands"}' },
      context,
    );
    expect(result.content).toMatch(/status <run>/);
  });
});
