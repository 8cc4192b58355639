#!/usr/bin/env -S npx tsx
// Size rule (CONTRIBUTING.md): no source file over 400 lines, no function over 80 own lines. A function's own
// lines are its lines minus the bodies of the functions nested inside it, so a factory that returns methods is
// measured by its own statements and each method is measured on its own.
// Usage: npx tsx scripts/check-sizes.ts [root]   (prints `path:line name lines` per offender, exits 1 if any)
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 80;

/** Names a whole file (`name` absent: its length and every function in it) or one function that may stay over. */
export interface AllowedOffender {
  path: string;
  name?: string;
}

/**
 * Files and functions still being split on other branches of issue 16; each is over a limit today. The merger
 * empties this list once those splits land, and nothing should be added to it.
 */
export const ALLOWED_OFFENDERS: readonly AllowedOffender[] = [];

export interface FunctionSize {
  name: string;
  /** 1-based line where the function starts. */
  line: number;
  ownLines: number;
}

export interface SourceSize {
  lines: number;
  functions: FunctionSize[];
}

export interface SizeOffender {
  path: string;
  line: number;
  /** The function's name, or `<file>` when the file itself is too long. */
  name: string;
  lines: number;
}

type FunctionNode = ts.FunctionLikeDeclaration;

function isFunctionNode(node: ts.Node): node is FunctionNode {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

/** The name a reader would search for: the declared name, or the variable/property the function is bound to. */
function functionName(node: FunctionNode, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (node.name !== undefined) return node.name.getText(source);
  const parent = node.parent;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    return parent.name.getText(source);
  }
  if (ts.isBinaryExpression(parent) && parent.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
    return parent.left.getText(source);
  }
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent)) {
    // A callback is named after what it is handed to: `worker.on(...)` -> `on(callback)`.
    const callee = parent.expression;
    const calleeName = ts.isPropertyAccessExpression(callee) ? callee.name.text : callee.getText(source);
    if (/^[\w$]+$/.test(calleeName)) return `${calleeName}(callback)`;
  }
  return '<anonymous>';
}

/** Counts lines as a reader does: a final newline does not start another line. */
function countLines(text: string): number {
  if (text.length === 0) return 0;
  const newlines = text.split('\n').length - 1;
  return text.endsWith('\n') ? newlines : newlines + 1;
}

export function measureSource(fileName: string, text: string): SourceSize {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line + 1;
  const functions: FunctionSize[] = [];

  // Records every function with its own lines; nested functions are measured when their parent reaches them.
  const visit = (node: ts.Node): void => {
    if (isFunctionNode(node)) {
      const start = lineOf(node.getStart(source));
      const end = lineOf(node.getEnd());
      let nestedBodyLines = 0;
      const collectNested = (child: ts.Node): void => {
        if (isFunctionNode(child)) {
          // The nested function's header and closing lines sit in the parent's code; its body is its own.
          nestedBodyLines += Math.max(0, lineOf(child.getEnd()) - lineOf(child.getStart(source)) - 1);
          visit(child);
          return;
        }
        ts.forEachChild(child, collectNested);
      };
      ts.forEachChild(node, collectNested);
      functions.push({
        name: functionName(node, source),
        line: start,
        ownLines: end - start + 1 - nestedBodyLines,
      });
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  functions.sort((left, right) => left.line - right.line);
  return { lines: countLines(text), functions };
}

function isAllowed(allowed: readonly AllowedOffender[], path: string, name: string): boolean {
  return allowed.some((entry) => entry.path === path && (entry.name === undefined || entry.name === name));
}

export function findOffenders(
  files: readonly { path: string; text: string }[],
  allowed: readonly AllowedOffender[] = [],
): SizeOffender[] {
  const offenders: SizeOffender[] = [];
  for (const file of files) {
    const size = measureSource(file.path, file.text);
    if (size.lines > MAX_FILE_LINES && !isAllowed(allowed, file.path, '<file>')) {
      offenders.push({ path: file.path, line: 1, name: '<file>', lines: size.lines });
    }
    for (const fn of size.functions) {
      if (fn.ownLines > MAX_FUNCTION_LINES && !isAllowed(allowed, file.path, fn.name)) {
        offenders.push({ path: file.path, line: fn.line, name: fn.name, lines: fn.ownLines });
      }
    }
  }
  return offenders;
}

/** Allow-list entries that match no offender any more: the split landed, so the entry should go. */
export function staleAllowances(
  allowed: readonly AllowedOffender[],
  offenders: readonly SizeOffender[],
): AllowedOffender[] {
  return allowed.filter(
    (entry) => !offenders.some((offender) => isAllowed([entry], offender.path, offender.name)),
  );
}

export function formatOffender(offender: SizeOffender): string {
  return `${offender.path}:${offender.line} ${offender.name} ${offender.lines}`;
}

/** Every .ts file under `directory`, as paths relative to `root` with forward slashes. */
export function listSourceFiles(root: string, directory = 'src'): string[] {
  const entries = readdirSync(join(root, directory), { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .sort();
}

/** Checks `root/src`; returns the process exit code. Stale allow-list entries are only noted. */
export function checkSizes(
  root: string,
  write: (line: string) => void,
  note: (line: string) => void = write,
): number {
  const files = listSourceFiles(root).map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') }));
  for (const entry of staleAllowances(ALLOWED_OFFENDERS, findOffenders(files))) {
    note(
      `check-sizes: ${entry.path}${entry.name === undefined ? '' : ` ${entry.name}`} is within the limits now; drop it from ALLOWED_OFFENDERS`,
    );
  }
  const offenders = findOffenders(files, ALLOWED_OFFENDERS);
  for (const offender of offenders) write(formatOffender(offender));
  if (offenders.length > 0) {
    write(
      `check-sizes: ${offenders.length} over the limits (files ${MAX_FILE_LINES} lines, functions ${MAX_FUNCTION_LINES} own lines)`,
    );
    return 1;
  }
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? join(fileURLToPath(import.meta.url), '..', '..');
  process.exitCode = checkSizes(
    root,
    (line) => process.stdout.write(`${line}\n`),
    (line) => process.stderr.write(`${line}\n`),
  );
}
