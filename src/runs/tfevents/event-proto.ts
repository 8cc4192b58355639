/**
 * Just enough protobuf to read scalars from a TensorBoard `Event` (field numbers from tensorflow's
 * core/util/event.proto, core/framework/summary.proto, tensor.proto, types.proto):
 *   Event        { double wall_time = 1; int64 step = 2; Summary summary = 5; }
 *   Summary      { repeated Value value = 1; }
 *   Value        { string tag = 1; float simple_value = 2; TensorProto tensor = 8; }
 *   TensorProto  { DataType dtype = 1; TensorShapeProto tensor_shape = 2; bytes tensor_content = 4;
 *                  repeated float float_val = 5 [packed]; repeated double double_val = 6 [packed];
 *                  repeated int32 half_val = 13 [packed]; }
 *   DataType     DT_FLOAT = 1, DT_DOUBLE = 2, DT_HALF = 19.
 * Everything else (graphs, histograms, images, the file_version record) is skipped by wire type.
 */

interface EventScalars {
  step: number;
  wallTime: number;
  /** Tag → value, for the scalars of this event. */
  scalars: Array<{ tag: string; value: number }>;
}

const DT_FLOAT = 1;
const DT_DOUBLE = 2;
const DT_HALF = 19;
const decoder = new TextDecoder();

/*
 * The decoder keeps its cursor in module state rather than in an object per message: a 100 MB event file
 * holds millions of tiny messages, and a reader object (and DataView) for each was most of the garbage.
 * Decoding is synchronous, so no two decodes share the cursor.
 */
let bytes: Uint8Array = new Uint8Array(0);
let view = new DataView(bytes.buffer);
let position = 0;

class MalformedEvent extends Error {}
const malformed = new MalformedEvent('malformed event');

function varint(end: number): number {
  let result = 0;
  let shift = 0;
  while (position < end) {
    const byte = bytes[position++] as number;
    // Past 2^53 precision is lost, but steps and lengths never get there.
    result += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return result;
    shift += 7;
    if (shift > 63) break;
  }
  throw malformed;
}

function skip(wireType: number, end: number): void {
  if (wireType === 0) varint(end);
  else if (wireType === 1) position += 8;
  else if (wireType === 2) {
    // Read the length first: `position += varint()` would add to the position before the varint.
    const length = varint(end);
    position += length;
  } else if (wireType === 5) position += 4;
  else throw malformed;
  if (position > end) throw malformed;
}

/** Moves past a length-delimited field; returns its end (its start is `position` before the move). */
function spanEnd(end: number): number {
  const length = varint(end);
  const fieldEnd = position + length;
  if (fieldEnd > end) throw malformed;
  return fieldEnd;
}

/** The last tags seen: a file repeats a handful of tags, so most tags are found here without a new string. */
const recentTags: string[] = [];
const RECENT_TAGS = 32;

function decodeTag(from: number, to: number): string {
  const length = to - from;
  for (const tag of recentTags) {
    if (tag.length !== length) continue;
    let index = 0;
    while (index < length && tag.charCodeAt(index) === bytes[from + index]) index++;
    if (index === length) return tag;
  }
  const tag = decoder.decode(bytes.subarray(from, to));
  if (recentTags.length >= RECENT_TAGS) recentTags.pop();
  recentTags.unshift(tag);
  return tag;
}

/** IEEE half precision to a number. */
function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** A scalar tensor's value (the first element), or undefined for other types. */
function tensorScalar(end: number): number | undefined {
  let dtype = 0;
  let value: number | undefined;
  let contentFrom = -1;
  let contentTo = -1;
  while (position < end) {
    const key = varint(end);
    const field = key >>> 3;
    const wireType = key & 7;
    if (field === 1 && wireType === 0) dtype = varint(end);
    else if (field === 4 && wireType === 2) {
      const to = spanEnd(end);
      contentFrom = position;
      contentTo = to;
      position = to;
    } else if (field === 5 && wireType === 2) {
      const to = spanEnd(end);
      if (to - position >= 4) value = view.getFloat32(position, true);
      position = to;
    } else if (field === 5 && wireType === 5) {
      value = view.getFloat32(position, true);
      position += 4;
    } else if (field === 6 && wireType === 2) {
      const to = spanEnd(end);
      if (to - position >= 8) value = view.getFloat64(position, true);
      position = to;
    } else if (field === 6 && wireType === 1) {
      value = view.getFloat64(position, true);
      position += 8;
    } else if (field === 13 && wireType === 2) {
      const to = spanEnd(end);
      if (position < to) value = halfToNumber(varint(to));
      position = to;
    } else if (field === 13 && wireType === 0) value = halfToNumber(varint(end));
    else skip(wireType, end);
  }
  if (value !== undefined) return value;
  if (contentFrom < 0) return undefined;
  if (dtype === DT_FLOAT && contentTo - contentFrom >= 4) return view.getFloat32(contentFrom, true);
  if (dtype === DT_DOUBLE && contentTo - contentFrom >= 8) return view.getFloat64(contentFrom, true);
  if (dtype === DT_HALF && contentTo - contentFrom >= 2)
    return halfToNumber(view.getUint16(contentFrom, true));
  return undefined;
}

/** One Summary.Value: calls `found` with its tag and number when it is a scalar. */
function readValue(end: number, found: (tag: string, value: number) => void): void {
  let tag: string | undefined;
  let number: number | undefined;
  while (position < end) {
    const key = varint(end);
    const field = key >>> 3;
    const wireType = key & 7;
    if (field === 1 && wireType === 2) {
      const to = spanEnd(end);
      tag = decodeTag(position, to);
      position = to;
    } else if (field === 2 && wireType === 5) {
      number = view.getFloat32(position, true);
      position += 4;
    } else if (field === 8 && wireType === 2) {
      const to = spanEnd(end);
      number ??= tensorScalar(to);
      position = to;
    } else skip(wireType, end);
  }
  if (tag !== undefined && number !== undefined) found(tag, number);
}

// The event being decoded (module state, like the cursor: no closure per event).
let currentSink: ScalarSink | undefined;
let step = 0;
let wallTime = 0;
let announced = false;
function found(tag: string, value: number): void {
  if (!announced) {
    currentSink?.step(step, wallTime);
    announced = true;
  }
  currentSink?.scalar(tag, value);
}

/** Receives one event's scalars: `step` first (once per event that has any), then each tag and value. */
export interface ScalarSink {
  step(step: number, wallTime: number): void;
  scalar(tag: string, value: number): void;
}

/**
 * Decodes the Event in `source[start, end)` into `sink` without copying it. Returns false when it is not
 * a valid Event (the record is skipped; scalars before the fault may have reached the sink).
 */
export function decodeEventInto(
  source: Uint8Array,
  sourceView: DataView,
  start: number,
  end: number,
  sink: ScalarSink,
): boolean {
  bytes = source;
  view = sourceView;
  position = start;
  currentSink = sink;
  step = 0;
  wallTime = 0;
  announced = false;
  try {
    while (position < end) {
      const key = varint(end);
      const field = key >>> 3;
      const wireType = key & 7;
      if (field === 1 && wireType === 1) {
        wallTime = view.getFloat64(position, true);
        position += 8;
      } else if (field === 2 && wireType === 0) step = varint(end);
      else if (field === 5 && wireType === 2) {
        const to = spanEnd(end);
        while (position < to) {
          const inner = varint(to);
          if (inner === 0x0a) {
            const valueEnd = spanEnd(to);
            readValue(valueEnd, found);
            position = valueEnd;
          } else skip(inner & 7, to);
        }
      } else skip(wireType, end);
    }
  } catch (error) {
    if (error instanceof MalformedEvent || error instanceof RangeError) return false;
    throw error;
  }
  return true;
}

/** The scalars of one event record, or undefined when it has none (or is not a valid Event). */
export function decodeEventScalars(record: Uint8Array): EventScalars | undefined {
  const event: EventScalars = { step: 0, wallTime: 0, scalars: [] };
  const valid = decodeEventInto(
    record,
    new DataView(record.buffer, record.byteOffset, record.byteLength),
    0,
    record.length,
    {
      step(step, wallTime) {
        event.step = step;
        event.wallTime = wallTime;
      },
      scalar: (tag, value) => event.scalars.push({ tag, value }),
    },
  );
  return valid && event.scalars.length > 0 ? event : undefined;
}
