import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * Throw-away source trees for the repository checks' tests: `create({ 'src/a.ts': '…' })` writes the
 * files under a new temporary folder and returns it; `removeAll()` (in `afterEach`) deletes them.
 */
export function createSourceTrees(label: string) {
  const roots: string[] = [];
  return {
    create(files: Record<string, string>): string {
      const root = mkdtempSync(join(tmpdir(), `shepherd-${label}-`));
      roots.push(root);
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      }
      return root;
    },
    removeAll(): void {
      for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
    },
  };
}
