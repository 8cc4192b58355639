import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readEventPoints } from '../../src/runs/tfevents/event-files.js';
import { decodeEventScalars } from '../../src/runs/tfevents/event-proto.js';
import { crc32c, maskedCrc32c, readRecords } from '../../src/runs/tfevents/tfrecord.js';

/*
 * TensorBoard event files: TFRecord framing with masked CRC32C, and the Event protobuf's scalars. The
 * fixture was written by test/fixtures/tfevents/make_fixture.py (a stdlib writer of the published formats;
 * no tensorflow here), and is checked against the bytes every real event file starts with.
 */

const FIXTURES = fileURLToPath(new URL('../fixtures/tfevents/', import.meta.url));
const fixture = () => new Uint8Array(readFileSync(`${FIXTURES}events.out.tfevents.fixture`));

describe('TFRecord framing', () => {
  it('computes CRC32C and its mask as TensorFlow does', () => {
    // The CRC32C check value (RFC 3720 appendix B.4 / the Castagnoli test vector).
    expect(crc32c(new TextEncoder().encode('123456789'))).toBe(0xe3069283);
    // Every real event file starts with an 8-byte length 24 whose masked CRC is a37f4b22 (LE): the
    // header of SummaryWriter's `file_version: "brain.Event:2"` record.
    const length = new Uint8Array([0x18, 0, 0, 0, 0, 0, 0, 0]);
    expect(maskedCrc32c(length)).toBe(0x224b7fa3);
    expect(Buffer.from(fixture().subarray(0, 12)).toString('hex')).toBe('180000000000000' + '0a37f4b22');
  });

  it('reads every record of the fixture and skips a torn last record until it is complete', () => {
    const bytes = fixture();
    const whole = readRecords(bytes);
    expect(whole.corrupt).toBeUndefined();
    expect(whole.consumed).toBe(bytes.length);
    expect(whole.records).toHaveLength(2 + 5 * 5);
    for (const cut of [bytes.length - 1, bytes.length - 5, bytes.length - 20]) {
      const torn = readRecords(bytes.subarray(0, cut));
      expect(torn.corrupt).toBeUndefined();
      expect(torn.records).toHaveLength(whole.records.length - 1);
      // The next read starts at the torn record and gets it once the writer finished it.
      const rest = readRecords(bytes.subarray(torn.consumed));
      expect(rest.records).toHaveLength(1);
    }
  });

  it('reports a corrupt record instead of reading garbage', () => {
    const bytes = fixture();
    const damaged = bytes.slice();
    damaged[40] = (damaged[40] ?? 0) ^ 0xff;
    const result = readRecords(damaged);
    expect(result.corrupt).toMatch(/checksum/);
    expect(result.records.length).toBeLessThan(27);
  });
});

describe('Event scalars', () => {
  it('decodes simple_value and float, double and half scalar tensors with their steps', () => {
    const scalars = readRecords(fixture())
      .records.map(decodeEventScalars)
      .filter((event) => event !== undefined)
      .flatMap((event) => event.scalars.map((scalar) => [event.step, scalar.tag, scalar.value] as const));
    const at = (tag: string) =>
      scalars.filter(([, name]) => name === tag).map(([step, , value]) => [step, value]);
    expect(at('train/loss')).toEqual([0, 1, 2, 3, 4].map((step) => [step, 2 - 0.25 * step]));
    const accuracy = at('eval/accuracy');
    expect(accuracy.map(([step]) => step)).toEqual([0, 1, 2, 3, 4]);
    for (const [step, value] of accuracy) expect(value).toBeCloseTo(0.5 + 0.1 * (step ?? 0), 6);
    for (const [step, value] of at('lr')) expect(value).toBe(1e-3 / ((step ?? 0) + 1));
    expect(at('half/loss')).toEqual([0, 1, 2, 3, 4].map((step) => [step, 1.5]));
    // The file_version, graph_def and number-less values are not scalars.
    expect(scalars.filter(([, name]) => name === 'sample')).toEqual([]);
    expect(scalars).toHaveLength(20);
  });

  it('matches what the committed script writes today (the fixture is reproducible)', () => {
    const script = `${FIXTURES}make_fixture.py`;
    const before = Buffer.from(fixture());
    execFileSync('/usr/bin/python3', [script], { cwd: FIXTURES });
    expect(Buffer.from(fixture()).equals(before)).toBe(true);
  });
});

/** A TFRecord around `data`, framed as RecordWriter does. */
function framed(data: Uint8Array): Uint8Array {
  const header = Buffer.alloc(12);
  header.writeUInt32LE(data.length, 0);
  header.writeUInt32LE(maskedCrc32c(header, 0, 8), 8);
  const footer = Buffer.alloc(4);
  footer.writeUInt32LE(maskedCrc32c(data));
  return Buffer.concat([header, data, footer]);
}

describe('Event files read in place', () => {
  it('skips a whole event whose protobuf is cut short, even after a scalar of it decoded', async () => {
    // Event{step: 99, summary{value{tag "bad", simple_value 1}, value{tag: length 9 but 2 bytes}}}: the
    // framing checks out, the message does not. Before the in-place decoder this was skipped whole too.
    const value = [0x0a, 0x03, 0x62, 0x61, 0x64, 0x15, 0x00, 0x00, 0x80, 0x3f];
    const cut = [0x0a, 0x09, 0x78, 0x79];
    const summary = [0x0a, value.length, ...value, 0x0a, cut.length, ...cut];
    const event = new Uint8Array([0x10, 99, 0x2a, summary.length, ...summary]);
    expect(decodeEventScalars(event)).toBeUndefined();
    const root = mkdtempSync(join(tmpdir(), 'shepherd-tfevents-'));
    try {
      writeFileSync(join(root, 'events.out.tfevents.1.test'), Buffer.concat([fixture(), framed(event)]));
      const { points, corrupt } = await readEventPoints(root, {}, 4 * 1024 * 1024);
      expect(corrupt).toEqual([]);
      expect(points.map((point) => point.step)).toEqual([0, 1, 2, 3, 4]);
      expect(points.flatMap((point) => Object.keys(point.metrics))).not.toContain('bad');
      expect(points[4]?.metrics['train/loss']).toBe(1);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
