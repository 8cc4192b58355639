import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';

/** `SHEPHERD_ENVIRONMENTS`, parsed at start-up; how a run enters one is src/runs/named-environments.ts. */

const environmentSpecSchema = z
  .object({
    python: z.string().min(1).optional(),
    venv: z.string().min(1).optional(),
    conda: z.string().min(1).optional(),
    container: z.string().min(1).optional(),
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).optional(),
  })
  .strict();
export type EnvironmentSpec = z.infer<typeof environmentSpecSchema>;

const environmentsSchema = z.record(z.string().regex(/^[\w.-]{1,64}$/), environmentSpecSchema);
export type Environments = Readonly<Record<string, EnvironmentSpec>>;

/** `SHEPHERD_ENVIRONMENTS`: JSON text, or a path to a JSON file. Throws with a sentence on bad input. */
export function parseEnvironments(value: string | undefined): Environments {
  if (value === undefined || value.trim() === '') return {};
  const trimmed = value.trim();
  let text = trimmed;
  if (!trimmed.startsWith('{')) {
    if (!existsSync(trimmed)) throw new Error(`not JSON and no file at ${trimmed}`);
    text = readFileSync(trimmed, 'utf8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`invalid JSON: ${(error as Error).message}`);
  }
  const parsed = environmentsSchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new Error(`${first?.path.join('.') || '(top level)'}: ${first?.message ?? 'invalid'}`);
  }
  return parsed.data as Environments;
}
