import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** Every variable the config schema parses (names in `environmentSchema`). */
function schemaVariables(): string[] {
  const source = read('src/config.ts');
  const start = source.indexOf('const environmentSchema = z.object({');
  const end = source.indexOf('\n});', start);
  expect(start).toBeGreaterThan(-1);
  const body = source.slice(start, end);
  return [...body.matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)].map((match) => match[1] ?? '');
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
