#!/usr/bin/env node
// Writes .env.example from the README's configuration table, so the two never disagree.
// Usage: node scripts/write-env-example.mjs
import { readFileSync, writeFileSync } from 'node:fs';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const start = readme.indexOf('## Configuration');
const end = readme.indexOf('\n## ', start + 5);
const rows = [...readme.slice(start, end).matchAll(/^\| `([A-Z][A-Z0-9_<>]+)` \| ([^|]*) \| (.*) \|$/gm)];
const lines = [
  '# Shepherd configuration: copy to .env and uncomment what you change. The environment overrides .env.',
  '# Generated from the README table by `node scripts/write-env-example.mjs`; every variable, with its default.',
  '',
];
for (const [, name, rawDefault, meaning] of rows) {
  const value = rawDefault.trim().replace(/^`|`$/g, '');
  const unset = value === '—' || value.startsWith('— ') || value === '';
  lines.push(`# ${meaning.replace(/`/g, '').replace(/\*\*/g, '').trim()}`);
  lines.push(`# ${name}=${unset ? '' : value}`);
  lines.push('');
}
writeFileSync(new URL('../.env.example', import.meta.url), lines.join('\n'));
console.log(`.env.example: ${rows.length} variables`);
