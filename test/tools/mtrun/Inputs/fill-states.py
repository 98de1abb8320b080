#!/usr/bin/env python3
"""Rewrites an mtrun checkpoint with every optimizer state filled with distinct values
(Python standard library only), so that a test sees where each element of a sharded state
goes:

  fill-states.py IN_DIR OUT_DIR

state:<name> element i becomes (tensor number) + i / 1024; parameters and the metadata are
kept, and the CRC-32C checksums of the changed tensors are recomputed."""
import array
import json
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(os.path.join(src, "checkpoint.safetensors"), "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__")
    body = data[8 + n:]
    out = bytearray()
    number = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        chunk = body[begin:end]
        if name.startswith("state:"):
            number += 1
            count = (end - begin) // 4
            chunk = array.array("f", (number + i / 1024.0 for i in range(count))).tobytes()
            metadata["crc32c:" + name] = "%08x" % crc32c(chunk)
        info["data_offsets"] = [len(out), len(out) + len(chunk)]
        out += chunk
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "checkpoint.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(out))


if __name__ == "__main__":
    main()
