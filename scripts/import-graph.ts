import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/**
 * The project's imports as data, read with the TypeScript parser (no type checking, so it is fast and
 * works on a fixture tree too). Both CI checks (import boundaries, dead exports) read this one graph.
 */

/** One import or re-export statement (or a dynamic `import()`) of a file. */
export interface ImportEdge {
  /** The specifier as written: `../runs/run-store.js`, `zod`, `node:fs`. */
  specifier: string;
  /** The imported file, relative to the root with `/` separators, when the specifier is relative. */
  target?: string;
  /** Names taken from the target; `*` when the whole module is (namespace import, `export *`, `import()`). */
  names: string[];
  /** A re-export (`export { x } from`, `export * from`): the names pass through this file. */
  reexport: boolean;
}

export interface SourceFileInfo {
  /** Relative to the root, `/` separators: `src/runs/run-store.ts`. */
  path: string;
  imports: ImportEdge[];
  /** Names this file exports (declarations, `export { … }`, `export default` as `default`). */
  exports: string[];
  text: string;
}

const SOURCE_PATTERN = /\.(ts|tsx|mts)$/;

/** Every TypeScript file under `directories` (relative to root), skipping `node_modules` and `.d.ts`. */
export function listSourceFiles(root: string, directories: string[]): string[] {
  const found: string[] = [];
  const walk = (directory: string) => {
    for (const entry of readdirSync(directory)) {
      if (entry === 'node_modules' || entry.startsWith('.')) continue;
      const full = join(directory, entry);
      if (statSync(full).isDirectory()) walk(full);
      else if (SOURCE_PATTERN.test(entry) && !entry.endsWith('.d.ts')) found.push(toRelative(root, full));
    }
  };
  for (const directory of directories) {
    const full = resolve(root, directory);
    if (existsSync(full)) walk(full);
  }
  return found.sort();
}

function toRelative(root: string, file: string): string {
  return relative(root, file).split(sep).join('/');
}

/** `./x.js` → `x.ts` (ESM suffixes name the emitted file); also a folder's `index.ts`. */
function resolveRelative(root: string, from: string, specifier: string): string | undefined {
  const base = resolve(root, dirname(from), specifier);
  const candidates = [
    base.replace(/\.js$/, '.ts'),
    base.replace(/\.js$/, '.tsx'),
    base.replace(/\.mjs$/, '.mts'),
    base,
    `${base}.ts`,
    join(base, 'index.ts'),
  ];
  const hit = candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
  return hit === undefined ? undefined : toRelative(root, hit);
}

function importedNames(clause: ts.ImportClause | undefined): string[] {
  if (clause === undefined) return [];
  const names: string[] = [];
  if (clause.name !== undefined) names.push('default');
  const bindings = clause.namedBindings;
  if (bindings !== undefined && ts.isNamespaceImport(bindings)) names.push('*');
  if (bindings !== undefined && ts.isNamedImports(bindings)) {
    for (const element of bindings.elements) names.push((element.propertyName ?? element.name).text);
  }
  return names;
}

function hasExportModifier(node: ts.Node): boolean {
  return (
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword)
  );
}

function isDefaultExport(node: ts.Node): boolean {
  return (
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((modifier) => modifier.kind === ts.SyntaxKind.DefaultKeyword)
  );
}

/** The names a top-level statement exports by itself (`export function f`, `export const a = …, b = …`). */
function declaredExports(statement: ts.Statement): string[] {
  if (!hasExportModifier(statement)) return [];
  if (isDefaultExport(statement)) return ['default'];
  if (ts.isVariableStatement(statement)) {
    return statement.declarationList.declarations.flatMap((declaration) =>
      ts.isIdentifier(declaration.name) ? [declaration.name.text] : [],
    );
  }
  const named = statement as ts.Statement & { name?: ts.Node };
  return named.name !== undefined && ts.isIdentifier(named.name) ? [named.name.text] : [];
}

/** Reads one file's imports and exports. */
export function readSourceFile(root: string, path: string): SourceFileInfo {
  const text = readFileSync(resolve(root, path), 'utf8');
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const imports: ImportEdge[] = [];
  const exports: string[] = [];
  const edge = (specifier: string, names: string[], reexport: boolean) => {
    const target = specifier.startsWith('.') ? resolveRelative(root, path, specifier) : undefined;
    imports.push({ specifier, names, reexport, ...(target === undefined ? {} : { target }) });
  };
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
      edge(statement.moduleSpecifier.text, importedNames(statement.importClause), false);
    } else if (ts.isExportDeclaration(statement)) {
      const clause = statement.exportClause;
      const names =
        clause === undefined
          ? ['*']
          : ts.isNamedExports(clause)
            ? clause.elements.map((element) => (element.propertyName ?? element.name).text)
            : ['*'];
      if (statement.moduleSpecifier !== undefined && ts.isStringLiteral(statement.moduleSpecifier)) {
        edge(statement.moduleSpecifier.text, names, true);
      }
      if (clause !== undefined && ts.isNamedExports(clause)) {
        for (const element of clause.elements) exports.push(element.name.text);
      }
    } else if (ts.isExportAssignment(statement)) {
      exports.push('default');
    } else {
      exports.push(...declaredExports(statement));
    }
  }
  // `import('…')` and `import x = require('…')` anywhere in the file take the whole module.
  const visit = (node: ts.Node) => {
    if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      edge(node.arguments[0].text, ['*'], false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { path, imports, exports, text };
}

/** Reads every source file under `directories`. */
export function readGraph(root: string, directories: string[]): SourceFileInfo[] {
  return listSourceFiles(root, directories).map((path) => readSourceFile(root, path));
}

/** The folder of a file: `src/bot/web/web-http.ts` → `src/bot/web`. */
export function folderOf(path: string): string {
  const index = path.lastIndexOf('/');
  return index === -1 ? '' : path.slice(0, index);
}

/** `@slack/bolt/x` → `@slack/bolt`, `zod/v4` → `zod`; `node:fs` and `fs`-style built-ins are not packages. */
export function packageName(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:'))
    return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
  return isBuiltin(name) ? undefined : name;
}

function isBuiltin(name: string): boolean {
  return builtinModules.includes(name);
}
