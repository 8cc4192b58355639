import { readFileSync } from 'node:fs';
import { checkPlateau } from './src/monitor/detectors/plateau.js';
import { DEFAULT_DETECTOR_CONFIG } from './src/monitor/types.js';

const name = process.argv[2]!;
const z = Number(process.argv[3]);
const all = readFileSync(`test/fixtures/curves/${name}.jsonl`, 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l.replace(/NaN|Infinity/g, 'null')))
  .filter((p) => typeof p.loss === 'number')
  .map((p) => ({ step: p.step, value: p.loss }));
let hits = 0;
let min = 1;
for (let i = 30; i < all.length; i += 5) {
  const pts = all.slice(0, i);
  const v = checkPlateau(
    { points: pts, firstStep: 0, lastStep: pts.at(-1)!.step },
    { ...DEFAULT_DETECTOR_CONFIG, plateauConfidenceZ: z },
  );
  if (v.plateau) hits++;
  if (v.bestCase !== undefined) min = Math.min(min, v.bestCase);
}
console.log(name, z, 'hits', hits, 'minBest', min.toFixed(4));
