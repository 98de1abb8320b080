#!/usr/bin/env python3
"""Compares the F32 tensors of two safetensors files (Python standard library only):

  compare-safetensors.py A B --rtol R [--noise NAME...]

Both files must hold the same tensor names and shapes; every tensor of B must be within R of
A relative to the largest magnitude of A's tensor. Tensors named by --noise (parameters whose
gradient is zero in exact arithmetic, so that Adam's normalisation turns rounding noise into
full-size steps) are only checked for shape. Prints the number of tensors compared."""
import argparse
import array
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(body[begin:end])
        tensors[name] = (info["shape"], values)
    return tensors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, required=True)
    parser.add_argument("--noise", nargs="*", default=[])
    args = parser.parse_args()
    a, b = read(args.a), read(args.b)
    if sorted(a) != sorted(b):
        sys.exit(f"tensor names differ: {sorted(a)} against {sorted(b)}")
    compared = 0
    for name, (shape, values) in a.items():
        other_shape, other = b[name]
        if shape != other_shape:
            sys.exit(f"{name}: shape {shape} against {other_shape}")
        if name in args.noise:
            continue
        compared += 1
        scale = max((abs(v) for v in values), default=0.0) or 1.0
        diff = max((abs(x - y) for x, y in zip(values, other)), default=0.0) / scale
        if diff > args.rtol:
            sys.exit(f"{name}: differs by {diff:.3g} relative (tolerance {args.rtol})")
    print(f"{compared} tensors within {args.rtol}, {len(a) - compared} noise")


if __name__ == "__main__":
    main()
