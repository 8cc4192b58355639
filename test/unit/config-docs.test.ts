import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The variable names of one object literal in a source file (`<opening>` up to the closing brace). */
function variablesIn(file: string, opening: string, closing: string): string[] {
  const source = read(file);
  const start = source.indexOf(opening);
  const end = source.indexOf(closing, start);
  expect(start).toBeGreaterThan(-1);
  const body = source.slice(start, end);
  return [...body.matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)].map((match) => match[1] ?? '');
}

/** Every variable the config schema parses (`environmentSchema`, and the backends' part it spreads in). */
function schemaVariables(): string[] {
  const backends = variablesIn('src/config/backends.ts', 'export const backendEnvironment = {', '\n};');
  expect(backends).toContain('SHEPHERD_BACKENDS');
  const redisAuth = variablesIn('src/config/redis-auth.ts', 'export const redisAuthEnvironment = {', '\n};');
  expect(redisAuth).toContain('REDIS_TLS_CA_FILE');
  return [
    ...variablesIn('src/config/config.ts', 'const environmentSchema = z.object({', '\n});'),
    ...backends,
    ...redisAuth,
  ];
}

/** Variables named in the README's configuration table. */
function readmeVariables(): Set<string> {
  const readme = read('README.md');
  const section = readme.slice(
    readme.indexOf('## Configuration'),
    readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5),
  );
  return new Set([...section.matchAll(/^\| `([A-Z][A-Z0-9_<>]+)`/gm)].map((match) => match[1] ?? ''));
}

describe('configuration documents', () => {
  it('the README table names every variable the config parses', () => {
    const documented = readmeVariables();
    const missing = schemaVariables().filter((name) => !documented.has(name));
    expect(missing).toEqual([]);
  });

  it('.env.example lists every variable of the README table', () => {
    const example = read('.env.example');
    const listed = new Set(
      [...example.matchAll(/^#?\s*([A-Z][A-Z0-9_<>]+)=/gm)].map((match) => match[1] ?? ''),
    );
    const missing = [...readmeVariables()].filter((name) => !listed.has(name));
    expect(missing).toEqual([]);
  });
});
