import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { readGraph, type SourceFileInfo } from './import-graph.js';

/**
 * The dead-export check `npm run lint` runs: an export of a src/ file that no other file (src/, test/,
 * bench/, scripts/) imports is either dead code or a local helper that should not be exported.
 */

export interface DeadExportOptions {
  /** Folders whose exports are checked. */
  checked: string[];
  /** Folders whose imports count as uses. */
  importers: string[];
  /** `path#name` (or `path#*` for a whole file) that are used from outside the import graph. */
  allowed: string[];
}

export const SHEPHERD_DEAD_EXPORTS: DeadExportOptions = {
  checked: ['src'],
  importers: ['src', 'test', 'bench', 'scripts'],
  // Nothing is allowed today; add `path#name` with a comment for an export used only from outside the graph.
  allowed: [],
};

export interface DeadExport {
  path: string;
  name: string;
  /** The name is still used inside its own file: drop `export`; otherwise delete the code. */
  usedLocally: boolean;
}

/** Identifiers named `name` in the file beyond its declaration mean a local use. */
function usedInFile(file: SourceFileInfo, name: string): boolean {
  const source = ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, false);
  let count = 0;
  const visit = (node: ts.Node) => {
    if (ts.isIdentifier(node) && node.text === name) count += 1;
    ts.forEachChild(node, visit);
  };
  visit(source);
  return count > 1;
}

/** Every export of a checked file that no other file imports, sorted by file. */
export function findDeadExports(
  root: string,
  options: DeadExportOptions = SHEPHERD_DEAD_EXPORTS,
): DeadExport[] {
  const files = readGraph(root, options.importers);
  const used = new Set<string>();
  for (const file of files) {
    for (const edge of file.imports) {
      if (edge.target === undefined || edge.target === file.path) continue;
      for (const name of edge.names) used.add(`${edge.target}#${name}`);
    }
  }
  const allowed = new Set(options.allowed);
  const dead: DeadExport[] = [];
  for (const file of files) {
    if (!options.checked.some((folder) => file.path.startsWith(`${folder}/`))) continue;
    if (used.has(`${file.path}#*`) || allowed.has(`${file.path}#*`)) continue;
    for (const name of new Set(file.exports)) {
      const key = `${file.path}#${name}`;
      if (used.has(key) || allowed.has(key)) continue;
      dead.push({ path: file.path, name, usedLocally: usedInFile(file, name) });
    }
  }
  return dead;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dead = findDeadExports(resolve(fileURLToPath(import.meta.url), '../..'));
  for (const entry of dead) {
    const advice = entry.usedLocally ? 'used only in its file: drop `export`' : 'unused: delete it';
    process.stderr.write(`${entry.path}: ${entry.name} — ${advice}\n`);
  }
  if (dead.length > 0) {
    process.stderr.write(`check-dead-exports: ${dead.length} export(s) nobody imports\n`);
    process.exit(1);
  }
  process.stdout.write('check-dead-exports: ok\n');
}
