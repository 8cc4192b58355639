import { writePageBundle } from './page-assets.js';

/** `tsx src/bot/web/build-page.ts <out-dir>`: bundle the playground page for a production build. */
const outDir = process.argv[2];
if (outDir === undefined) {
  process.stderr.write('usage: build-page.ts <out-dir>\n');
  process.exit(2);
}
await writePageBundle(outDir);
process.stdout.write(`playground page bundled into ${outDir}\n`);
