/**
 * TensorBoard event files read by the monitor (src/runs/tfevents). Prints:
 *  tfevents_points_per_s — scalars per CPU-second through `readEventPoints` (TFRecord framing with both
 *    masked CRC32C checks, the Event protobuf decode, grouping by step) over a ~100 MB event file written
 *    at bench time: SummaryWriter-style events, one `simple_value` scalar each, cycling through 8 tags
 *    (goal ≥ 1,000,000), read in 4 MiB ticks as the monitor does.
 * Run: npx tsx bench/tfevents-read.ts
 */
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readEventPoints } from '../src/runs/tfevents/event-files.js';
import { maskedCrc32c } from '../src/runs/tfevents/tfrecord.js';

const TARGET_BYTES = 100 * 1024 * 1024;
const TAGS = [
  'train/loss',
  'train/lr',
  'train/grad_norm',
  'eval/loss',
  'eval/accuracy',
  'tokens_per_s',
  'mfu',
  'x',
];
const TICK_BYTES = 4 * 1024 * 1024;

function varint(value: number, out: number[]): void {
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
}

/** One Event{wall_time, step, summary{value{tag, simple_value}}} framed as a TFRecord. */
function record(step: number, tag: string, value: number): Buffer {
  const tagBytes = Buffer.from(tag);
  const valueMessage: number[] = [0x0a];
  varint(tagBytes.length, valueMessage);
  valueMessage.push(...tagBytes, 0x15);
  const float = Buffer.alloc(4);
  float.writeFloatLE(value);
  valueMessage.push(...float);
  const summary: number[] = [0x0a];
  varint(valueMessage.length, summary);
  summary.push(...valueMessage);
  const event: number[] = [0x09];
  const wall = Buffer.alloc(8);
  wall.writeDoubleLE(1_700_000_000 + step);
  event.push(...wall, 0x10);
  varint(step, event);
  event.push(0x2a);
  varint(summary.length, event);
  event.push(...summary);
  const data = Buffer.from(event);
  const header = Buffer.alloc(12);
  header.writeUInt32LE(data.length, 0);
  header.writeUInt32LE(maskedCrc32c(header, 0, 8), 8);
  const footer = Buffer.alloc(4);
  footer.writeUInt32LE(maskedCrc32c(data));
  return Buffer.concat([header, data, footer]);
}

async function main(): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'shepherd-bench-tfevents-'));
  try {
    await mkdir(join(root, 'runs'));
    const handle = await open(join(root, 'runs', 'events.out.tfevents.1700000000.bench.1.0'), 'w');
    let written = 0;
    let scalars = 0;
    for (let step = 0; written < TARGET_BYTES; step++) {
      const chunk: Buffer[] = [];
      for (const tag of TAGS) chunk.push(record(step, tag, Math.sin(step) + 2));
      const bytes = Buffer.concat(chunk);
      await handle.write(bytes);
      written += bytes.length;
      scalars += TAGS.length;
    }
    await handle.close();
    const cursors = {};
    let points = 0;
    let read = 0;
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    for (;;) {
      const tick = await readEventPoints(root, cursors, TICK_BYTES);
      for (const point of tick.points) read += Object.keys(point.metrics).length;
      points += tick.points.length;
      if (!tick.more) break;
    }
    const cpu = process.cpuUsage(cpuBefore);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    process.stderr.write(
      `# ${(written / 1e6).toFixed(1)} MB, ${scalars} scalars written, ${read} read into ${points} points: ${cpuSeconds.toFixed(2)} s CPU, ${((performance.now() - started) / 1000).toFixed(2)} s wall\n`,
    );
    if (read !== scalars) throw new Error(`read ${read} scalars of ${scalars}`);
    process.stdout.write(`tfevents_points_per_s=${Math.round(read / cpuSeconds)}\n`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

await main();
