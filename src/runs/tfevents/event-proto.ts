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

/** A cursor over one message's bytes; `fail` marks a malformed message (the record is skipped). */
class Reader {
  position: number;
  constructor(
    readonly bytes: Uint8Array,
    readonly view: DataView,
    start: number,
    readonly end: number,
  ) {
    this.position = start;
  }

  varint(): number {
    let result = 0;
    let shift = 0;
    while (this.position < this.end) {
      const byte = this.bytes[this.position++] as number;
      // Past 2^53 precision is lost, but steps and lengths never get there.
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
      if (shift > 63) break;
    }
    throw new RangeError('truncated varint');
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.position += 8;
    else if (wireType === 2) {
      // Read the length first: `position += varint()` would add to the position before the varint.
      const length = this.varint();
      this.position += length;
    } else if (wireType === 5) this.position += 4;
    else throw new RangeError(`wire type ${wireType}`);
    if (this.position > this.end) throw new RangeError('field past the end');
  }

  /** [start, end) of a length-delimited field. */
  span(): [number, number] {
    const length = this.varint();
    const start = this.position;
    this.position += length;
    if (this.position > this.end) throw new RangeError('field past the end');
    return [start, this.position];
  }
}

/** Tags are short and ASCII almost always: building the string by hand beats TextDecoder 5-fold. */
function decodeTag(bytes: Uint8Array, from: number, to: number): string {
  if (to - from > 64) return decoder.decode(bytes.subarray(from, to));
  let text = '';
  for (let index = from; index < to; index++) {
    const code = bytes[index] as number;
    if (code >= 0x80) return decoder.decode(bytes.subarray(from, to));
    text += String.fromCharCode(code);
  }
  return text;
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
function tensorScalar(reader: Reader, start: number, end: number): number | undefined {
  const tensor = new Reader(reader.bytes, reader.view, start, end);
  let dtype = 0;
  let value: number | undefined;
  let content: [number, number] | undefined;
  while (tensor.position < end) {
    const key = tensor.varint();
    const field = Math.floor(key / 8);
    const wireType = key & 7;
    if (field === 1 && wireType === 0) dtype = tensor.varint();
    else if (field === 4 && wireType === 2) content = tensor.span();
    else if (field === 5 && wireType === 2) {
      const [from, to] = tensor.span();
      if (to - from >= 4) value = tensor.view.getFloat32(from, true);
    } else if (field === 5 && wireType === 5) {
      value = tensor.view.getFloat32(tensor.position, true);
      tensor.position += 4;
    } else if (field === 6 && wireType === 2) {
      const [from, to] = tensor.span();
      if (to - from >= 8) value = tensor.view.getFloat64(from, true);
    } else if (field === 6 && wireType === 1) {
      value = tensor.view.getFloat64(tensor.position, true);
      tensor.position += 8;
    } else if (field === 13 && wireType === 2) {
      const [from] = tensor.span();
      const inner = new Reader(tensor.bytes, tensor.view, from, tensor.position);
      if (from < tensor.position) value = halfToNumber(inner.varint());
    } else if (field === 13 && wireType === 0) value = halfToNumber(tensor.varint());
    else tensor.skip(wireType);
  }
  if (value !== undefined) return value;
  if (content === undefined) return undefined;
  const [from, to] = content;
  if (dtype === DT_FLOAT && to - from >= 4) return tensor.view.getFloat32(from, true);
  if (dtype === DT_DOUBLE && to - from >= 8) return tensor.view.getFloat64(from, true);
  if (dtype === DT_HALF && to - from >= 2) return halfToNumber(tensor.view.getUint16(from, true));
  return undefined;
}

function readValue(reader: Reader, start: number, end: number, into: EventScalars['scalars']): void {
  const value = new Reader(reader.bytes, reader.view, start, end);
  let tag: string | undefined;
  let number: number | undefined;
  while (value.position < end) {
    const key = value.varint();
    const field = Math.floor(key / 8);
    const wireType = key & 7;
    if (field === 1 && wireType === 2) {
      const [from, to] = value.span();
      tag = decodeTag(value.bytes, from, to);
    } else if (field === 2 && wireType === 5) {
      number = value.view.getFloat32(value.position, true);
      value.position += 4;
    } else if (field === 8 && wireType === 2) {
      const [from, to] = value.span();
      number ??= tensorScalar(value, from, to);
    } else value.skip(wireType);
  }
  if (tag !== undefined && number !== undefined) into.push({ tag, value: number });
}

/** The scalars of one event record, or undefined when it has none (or is not a valid Event). */
export function decodeEventScalars(record: Uint8Array): EventScalars | undefined {
  const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
  const reader = new Reader(record, view, 0, record.length);
  const event: EventScalars = { step: 0, wallTime: 0, scalars: [] };
  try {
    while (reader.position < record.length) {
      const key = reader.varint();
      const field = Math.floor(key / 8);
      const wireType = key & 7;
      if (field === 1 && wireType === 1) {
        event.wallTime = view.getFloat64(reader.position, true);
        reader.position += 8;
      } else if (field === 2 && wireType === 0) event.step = reader.varint();
      else if (field === 5 && wireType === 2) {
        const [from, to] = reader.span();
        const summary = new Reader(record, view, from, to);
        while (summary.position < to) {
          const inner = summary.varint();
          if (inner === 0x0a) {
            const [valueFrom, valueTo] = summary.span();
            readValue(summary, valueFrom, valueTo, event.scalars);
          } else summary.skip(inner & 7);
        }
      } else reader.skip(wireType);
    }
  } catch {
    // A malformed event: skipped, like a record without scalars.
    return undefined;
  }
  return event.scalars.length === 0 ? undefined : event;
}
