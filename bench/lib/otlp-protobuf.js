'use strict';
/**
 * OTLP's protobuf encoding read by hand, for the bench's OTLP sink (bench/lib/otlp-sink.js) and the
 * tests' collector (test/support/otlp-receiver.ts): the fields of one message, so a trace export
 * request is walked without a protobuf library and its generated schema (field numbers:
 * opentelemetry-proto's trace/v1 and common/v1).
 */

/**
 * A message's fields: number → values in order (varint: bigint; fixed64, fixed32 and
 * length-delimited: the bytes). Throws on a truncated message or a wire type OTLP never uses.
 * @param {Buffer} buf
 * @returns {Map<number, Array<bigint | Buffer>>}
 */
function protobufFields(buf) {
  const out = new Map();
  let i = 0;
  const varint = () => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const b = buf[i++];
      if (b === undefined) throw new Error('protobuf: truncated varint');
      v |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
  };
  const bytes = (n) => {
    if (i + n > buf.length) throw new Error('protobuf: truncated field');
    const b = buf.subarray(i, i + n);
    i += n;
    return b;
  };
  while (i < buf.length) {
    const tag = Number(varint());
    const wire = tag & 7;
    const value = wire === 0 ? varint() : wire === 1 ? bytes(8) : wire === 2 ? bytes(Number(varint())) : wire === 5 ? bytes(4) : null;
    if (value === null) throw new Error(`protobuf: wire type ${wire}`);
    const list = out.get(tag >>> 3);
    if (list) list.push(value);
    else out.set(tag >>> 3, [value]);
  }
  return out;
}

/** Spans in an ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) → spans (2). */
function countSpans(body) {
  let n = 0;
  for (const rs of protobufFields(body).get(1) ?? []) for (const ss of protobufFields(rs).get(2) ?? []) n += (protobufFields(ss).get(2) ?? []).length;
  return n;
}

module.exports = { protobufFields, countSpans };
