import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { folderOf, packageName, readGraph, type SourceFileInfo } from './import-graph.js';

/**
 * The import-boundary check `npm run lint` runs. Rules:
 * (a) a port imports no npm package but zod, not even through the files it imports;
 * (b) no two folders (directories: src/bot and src/bot/web are different) import each other — files
 *     directly in src/ are shared ground and exempt;
 * (c) nothing outside src/app/ and src/cli/ imports a composition root (src/app/app.ts, features.ts, main.ts);
 *     src/app/ is where the app is composed (the roots and the per-feature factories), the CLI composes it too;
 * (d) one door into runs/: outside src/runs/ only composition roots import the run store, the executors, the
 *     reports behind `RunQueries` or the life cycle's inner parts; readers use `RunQueries` (run-queries.ts);
 * (e) no two rooms (top-level folders under src/, subfolders counted in: src/bot/web is in src/bot) import
 *     each other, so a subfolder cannot carry a cycle between rooms that (b) would not see;
 * (f) no import cycle between files (type-only imports count: they tie the files' meaning together).
 */

export interface BoundaryRules {
  /** The source folder the folder rule applies to. */
  sourceRoot: string;
  /** The ports and the only packages they may import. */
  ports: string[];
  portPackages: string[];
  compositionRoots: string[];
  /** Folders that are composition roots themselves (they may import the roots and runs internals). */
  compositionFolders: string[];
  /** The runs folder and the files behind its door. */
  runsFolder: string;
  runsInternals: string[];
}

export const SHEPHERD_RULES: BoundaryRules = {
  sourceRoot: 'src',
  ports: [
    'src/bot/chat-adapter.ts',
    'src/bot/runs-directory.ts',
    'src/agent/llm-provider.ts',
    'src/runs/executor.ts',
    'src/tools/tool-call.ts',
    'src/tools/registry.ts',
  ],
  portPackages: ['zod'],
  // create-runs wires the runs core (store, executors) from config, for app.ts and the tests.
  compositionRoots: ['src/app/app.ts', 'src/app/features.ts', 'src/app/main.ts', 'src/app/create-runs.ts'],
  // src/app/ holds the roots and the per-feature factories features.ts composes; they wire stores and executors too.
  compositionFolders: ['src/cli', 'src/app'],
  runsFolder: 'src/runs',
  runsInternals: [
    'src/runs/records/run-store.ts',
    'src/runs/local-executor.ts',
    'src/runs/slurm/slurm-executor.ts',
    'src/runs/run-reports.ts',
    'src/runs/lifecycle/run-transitions.ts',
    'src/runs/lifecycle/run-launcher.ts',
    'src/runs/lifecycle/run-endings.ts',
    'src/runs/lifecycle/run-actions.ts',
    'src/runs/lifecycle/run-creation.ts',
    'src/runs/lifecycle/run-lock.ts',
  ],
};

function inside(path: string, folder: string): boolean {
  return path.startsWith(`${folder}/`);
}

/** (a): walks each port's imports (type-only ones too: an SDK type in a port is an SDK dependency). */
function portViolations(graph: Map<string, SourceFileInfo>, rules: BoundaryRules): string[] {
  const found: string[] = [];
  for (const port of rules.ports) {
    const seen = new Set<string>();
    const queue: { path: string; via: string[] }[] = [{ path: port, via: [port] }];
    while (queue.length > 0) {
      const next = queue.shift();
      if (next === undefined || seen.has(next.path)) continue;
      seen.add(next.path);
      for (const edge of graph.get(next.path)?.imports ?? []) {
        const name = packageName(edge.specifier);
        if (name !== undefined && !rules.portPackages.includes(name)) {
          found.push(`port ${port} imports the package ${name} (${next.via.join(' → ')})`);
        }
        if (edge.target !== undefined) queue.push({ path: edge.target, via: [...next.via, edge.target] });
      }
    }
  }
  return found;
}

/** (b): every pair of folders that import each other, with the files on both sides. */
function folderCycleViolations(files: SourceFileInfo[], rules: BoundaryRules): string[] {
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const from = folderOf(file.path);
    if (!inside(file.path, rules.sourceRoot) || from === rules.sourceRoot) continue;
    for (const edge of file.imports) {
      if (edge.target === undefined) continue;
      const to = folderOf(edge.target);
      if (to === from || to === rules.sourceRoot || !inside(edge.target, rules.sourceRoot)) continue;
      const key = `${from}|${to}`;
      edges.set(key, [...(edges.get(key) ?? []), `${file.path} → ${edge.target}`]);
    }
  }
  const found: string[] = [];
  for (const [key, pairs] of edges) {
    const [from = '', to = ''] = key.split('|');
    const back = edges.get(`${to}|${from}`);
    if (back === undefined || from > to) continue;
    found.push(`folders ${from} and ${to} import each other:\n    ${[...pairs, ...back].join('\n    ')}`);
  }
  return found;
}

/** A file's room: the top-level folder under the source root (undefined for files directly in it). */
function roomOf(path: string, rules: BoundaryRules): string | undefined {
  if (!inside(path, rules.sourceRoot)) return undefined;
  const rest = path.slice(rules.sourceRoot.length + 1);
  const slash = rest.indexOf('/');
  return slash === -1 ? undefined : `${rules.sourceRoot}/${rest.slice(0, slash)}`;
}

/** (e): every pair of rooms that import each other, with the files on both sides. */
function roomCycleViolations(files: SourceFileInfo[], rules: BoundaryRules): string[] {
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const from = roomOf(file.path, rules);
    for (const edge of file.imports) {
      const to = edge.target === undefined ? undefined : roomOf(edge.target, rules);
      if (from === undefined || to === undefined || to === from) continue;
      const key = `${from}|${to}`;
      edges.set(key, [...(edges.get(key) ?? []), `${file.path} → ${edge.target}`]);
    }
  }
  const found: string[] = [];
  for (const [key, pairs] of edges) {
    const [from = '', to = ''] = key.split('|');
    const back = edges.get(`${to}|${from}`);
    if (back === undefined || from > to) continue;
    // Files directly in both rooms on every edge: (b) already names this pair.
    const direct = (pair: string) =>
      pair.split(' → ').every((side) => folderOf(side) === from || folderOf(side) === to);
    if ([...pairs, ...back].every(direct)) continue;
    found.push(`rooms ${from} and ${to} import each other:\n    ${[...pairs, ...back].join('\n    ')}`);
  }
  return found;
}

/** (f): the strongly connected groups of files (Tarjan's algorithm), each named by its files in order. */
function fileCycleViolations(graph: Map<string, SourceFileInfo>): string[] {
  const order = new Map<string, number>();
  const lowest = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[] = [];
  const visit = (path: string): void => {
    order.set(path, order.size);
    lowest.set(path, order.get(path) ?? 0);
    stack.push(path);
    onStack.add(path);
    for (const edge of graph.get(path)?.imports ?? []) {
      const target = edge.target;
      if (target === undefined || !graph.has(target)) continue;
      if (!order.has(target)) {
        visit(target);
        lowest.set(path, Math.min(lowest.get(path) ?? 0, lowest.get(target) ?? 0));
      } else if (onStack.has(target)) {
        lowest.set(path, Math.min(lowest.get(path) ?? 0, order.get(target) ?? 0));
      }
    }
    if (lowest.get(path) !== order.get(path)) return;
    const group: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      group.push(member);
      if (member === path) break;
    }
    if (group.length > 1) found.push(`files import each other in a cycle: ${group.sort().join(', ')}`);
  };
  for (const path of graph.keys()) if (!order.has(path)) visit(path);
  return found;
}

/** (c) and (d). */
function doorViolations(files: SourceFileInfo[], rules: BoundaryRules): string[] {
  const found: string[] = [];
  for (const file of files) {
    const composes =
      rules.compositionRoots.includes(file.path) ||
      rules.compositionFolders.some((folder) => inside(file.path, folder));
    if (composes) continue;
    for (const edge of file.imports) {
      if (edge.target === undefined) continue;
      if (rules.compositionRoots.includes(edge.target) && folderOf(file.path) !== rules.sourceRoot) {
        found.push(`${file.path} imports the composition root ${edge.target}`);
      }
      if (rules.runsInternals.includes(edge.target) && !inside(file.path, rules.runsFolder)) {
        found.push(
          `${file.path} reaches behind the runs door: ${edge.target} (read through RunQueries, src/runs/run-queries.ts)`,
        );
      }
    }
  }
  return found;
}

/** All violations under `root` (the repository, or a fixture tree in tests). */
export function checkBoundaries(root: string, rules: BoundaryRules = SHEPHERD_RULES): string[] {
  const files = readGraph(root, [rules.sourceRoot]);
  const graph = new Map(files.map((file) => [file.path, file]));
  return [
    ...portViolations(graph, rules),
    ...folderCycleViolations(files, rules),
    ...doorViolations(files, rules),
    ...roomCycleViolations(files, rules),
    ...fileCycleViolations(graph),
  ];
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const violations = checkBoundaries(resolve(fileURLToPath(import.meta.url), '../..'));
  for (const violation of violations) process.stderr.write(`${violation}\n`);
  if (violations.length > 0) {
    process.stderr.write(`check-boundaries: ${violations.length} violation(s)\n`);
    process.exit(1);
  }
  process.stdout.write('check-boundaries: ok\n');
}
