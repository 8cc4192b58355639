/**
 * TFRecord framing, as TensorFlow's `RecordWriter` writes event files:
 *   uint64 length (little-endian) · uint32 masked CRC32C of those 8 bytes · data · uint32 masked CRC32C of data.
 * (tensorflow/core/lib/io/record_writer.cc; the mask is tensorflow/core/lib/hash/crc32c.h `Mask`.)
 */

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), slicing-by-8 tables: the checksum is most of a read.
const TABLES: Uint32Array[] = [];
{
  const base = new Uint32Array(256);
  for (let index = 0; index < 256; index++) {
    let crc = index;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
    base[index] = crc >>> 0;
  }
  TABLES.push(base);
  for (let table = 1; table < 8; table++) {
    const previous = TABLES[table - 1] as Uint32Array;
    const next = new Uint32Array(256);
    for (let index = 0; index < 256; index++) {
      const value = previous[index] as number;
      next[index] = ((value >>> 8) ^ (base[value & 0xff] as number)) >>> 0;
    }
    TABLES.push(next);
  }
}
const [T0, T1, T2, T3, T4, T5, T6, T7] = TABLES as [
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
];

export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  // `as number`: indexes are in range by the loop bounds (a cast costs nothing; `?? 0` would, per byte).
  let crc = 0xffffffff;
  let index = start;
  while (end - index >= 8) {
    const low =
      (crc ^
        ((bytes[index] as number) |
          ((bytes[index + 1] as number) << 8) |
          ((bytes[index + 2] as number) << 16) |
          ((bytes[index + 3] as number) << 24))) >>>
      0;
    crc =
      (T7[low & 0xff] as number) ^
      (T6[(low >>> 8) & 0xff] as number) ^
      (T5[(low >>> 16) & 0xff] as number) ^
      (T4[low >>> 24] as number) ^
      (T3[bytes[index + 4] as number] as number) ^
      (T2[bytes[index + 5] as number] as number) ^
      (T1[bytes[index + 6] as number] as number) ^
      (T0[bytes[index + 7] as number] as number);
    index += 8;
  }
  while (index < end) crc = (T0[(crc ^ (bytes[index++] as number)) & 0xff] as number) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** TensorFlow stores `((crc >> 15) | (crc << 17)) + 0xa282ead8`, so a CRC of data holding CRCs stays strong. */
export function maskedCrc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  const crc = crc32c(bytes, start, end);
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** Longer records are not scalar events; the file is treated as corrupt from there. */
const MAX_RECORD_BYTES = 64 * 1024 * 1024;

interface RecordBatch {
  /** Each record's data (views into the buffer). */
  records: Uint8Array[];
  /** Bytes of whole, checked records from the start of the buffer: the next read starts after them. */
  consumed: number;
  /** A checksum did not match: the file is corrupt at `consumed` (not merely still being written). */
  corrupt?: string;
}

/**
 * Visits the complete records at the start of `buffer` as [start, end) of their data. A record cut short
 * (the writer is still writing it, or the read cap cut it) ends the scan without error: it is read once it
 * is complete.
 */
export function scanRecords(
  buffer: Uint8Array,
  view: DataView,
  visit: (start: number, end: number) => void,
): Omit<RecordBatch, 'records'> {
  let offset = 0;
  while (buffer.length - offset >= 12) {
    const high = view.getUint32(offset + 4, true);
    const length = view.getUint32(offset, true);
    if (view.getUint32(offset + 8, true) !== maskedCrc32c(buffer, offset, offset + 8))
      return { consumed: offset, corrupt: `bad length checksum at byte ${offset}` };
    if (high !== 0 || length > MAX_RECORD_BYTES)
      return { consumed: offset, corrupt: `record of ${high * 2 ** 32 + length} bytes at byte ${offset}` };
    const end = offset + 12 + length + 4;
    if (end > buffer.length) break;
    if (view.getUint32(end - 4, true) !== maskedCrc32c(buffer, offset + 12, end - 4))
      return { consumed: offset, corrupt: `bad data checksum at byte ${offset}` };
    visit(offset + 12, end - 4);
    offset = end;
  }
  return { consumed: offset };
}

/** The complete records at the start of `buffer`, as views into it (see `scanRecords`). */
export function readRecords(buffer: Uint8Array): RecordBatch {
  const records: Uint8Array[] = [];
  const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  const scan = scanRecords(buffer, view, (start, end) => records.push(buffer.subarray(start, end)));
  return { records, ...scan };
}
