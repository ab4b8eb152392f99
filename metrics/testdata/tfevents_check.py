#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, standard library only.

Checks what a TensorBoard (or `wandb sync --sync-tensorboard`) reader
checks before it trusts an event file, and prints its scalars:

  - TFRecord framing: uint64 little-endian length, masked CRC-32C of the
    length, the data, masked CRC-32C of the data (tensorflow's
    core/lib/io/record_writer.cc; the mask is crc32c.h's Mask:
    ((crc >> 15) | (crc << 17)) + 0xa282ead8);
  - the first event is file_version "brain.Event:" something;
  - every event is a tensorflow.Event (core/util/event.proto: wall_time 1
    double, step 2 int64, file_version 3 string, summary 5, session_log 6)
    whose summary values (core/framework/summary.proto: Value.tag 1 string,
    simple_value 2 float) are decoded.

Usage: tfevents_check.py EVENT_FILE  -> one JSON object per scalar on stdout,
{"tag": ..., "step": ..., "value": ..., "wall_time": ...}; exit status 1 with
a message on stderr for a file that is not valid.
"""
import json
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob):
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            raise ValueError("%d trailing bytes at offset %d" % (len(blob) - at, at))
        (n,) = struct.unpack_from("<Q", blob, at)
        (lcrc,) = struct.unpack_from("<I", blob, at + 8)
        if lcrc != masked(blob[at:at + 8]):
            raise ValueError("length CRC mismatch at offset %d" % at)
        if at + 16 + n > len(blob):
            raise ValueError("record at offset %d overruns the file" % at)
        data = blob[at + 12:at + 12 + n]
        (dcrc,) = struct.unpack_from("<I", blob, at + 12 + n)
        if dcrc != masked(data):
            raise ValueError("data CRC mismatch at offset %d" % at)
        yield data
        at += 16 + n


def varint(buf, at):
    shift = value = 0
    while True:
        if at >= len(buf):
            raise ValueError("truncated varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf):
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, at = varint(buf, at)
        elif wire == 1:
            v = buf[at:at + 8]
            at += 8
        elif wire == 2:
            n, at = varint(buf, at)
            v = buf[at:at + n]
            at += n
        elif wire == 5:
            v = buf[at:at + 4]
            at += 4
        else:
            raise ValueError("wire type %d" % wire)
        if at > len(buf):
            raise ValueError("field %d overruns its message" % num)
        yield num, wire, v


def main(path):
    with open(path, "rb") as f:
        blob = f.read()
    first = True
    for data in records(blob):
        event = {"wall_time": None, "step": 0, "file_version": None, "values": []}
        for num, wire, v in fields(data):
            if num == 1 and wire == 1:
                event["wall_time"] = struct.unpack("<d", v)[0]
            elif num == 2 and wire == 0:
                event["step"] = v - (1 << 64) if v >= 1 << 63 else v
            elif num == 3 and wire == 2:
                event["file_version"] = v.decode("utf-8")
            elif num == 5 and wire == 2:
                for snum, swire, sv in fields(v):
                    if snum != 1 or swire != 2:
                        continue
                    tag, value = None, None
                    for vnum, vwire, vv in fields(sv):
                        if vnum == 1 and vwire == 2:
                            tag = vv.decode("utf-8")
                        elif vnum == 2 and vwire == 5:
                            value = struct.unpack("<f", vv)[0]
                    event["values"].append((tag, value))
        if event["wall_time"] is None:
            raise ValueError("an event without wall_time")
        if first:
            if not (event["file_version"] or "").startswith("brain.Event:"):
                raise ValueError("the first event is not a file version")
            first = False
        for tag, value in event["values"]:
            print(json.dumps({"tag": tag, "step": event["step"], "value": value, "wall_time": event["wall_time"]}))
    if first:
        raise ValueError("no events")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (ValueError, OSError, UnicodeDecodeError) as e:
        print("%s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(1)
