#!/usr/bin/env python3
"""Checks a safetensors file that `mtrun PLAN --export-safetensors FILE` wrote against PLAN.

Reads the file with the standard library only (struct + json): u64 little-endian header
length, the JSON header, the data. Prints the metadata, then one line per tensor:

  wte F32 [64, 32] normal(0.02): ok (mean 0.0003, std 0.0199)

and "FAIL: ..." (exit status 1) for anything wrong: a tensor missing or extra, another dtype or
shape, offsets that do not tile the data, values that do not follow the initialiser (zeros,
ones and constant exactly; normal and uniform by their statistics and range), metadata that
does not name the plan (format mtc, model, seed, plan_sha256 = SHA-256 of plan.json).
Normal and uniform values are also recomputed here, by an independent Python Philox4x32-10
keyed as docs/plan-format.md says: (seed, tensor_id, global row-major element index, step 0).
"""

import hashlib
import json
import math
import os
import struct
import sys


MASK = 0xFFFFFFFF


def philox(ctr, key):
    """Philox4x32-10 (Salmon et al., SC'11)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + 0x9E3779B9) & MASK
            k1 = (k1 + 0xBB67AE85) & MASK
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ k1) & MASK, p0 & MASK
    return c0, c1, c2, c3


# Random123's known answer for a zero counter and key.
assert philox((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_value(kind, args, seed, tensor_id, index):
    w = philox((index & MASK, index >> 32, tensor_id, 0), (seed & MASK, seed >> 32))
    if kind == "normal":
        u1 = ((w[0] >> 8) + 1) * 2.0 ** -24
        u2 = (w[1] >> 8) * 2.0 ** -24
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2 * math.pi * u2)
        mean = f32(args[1]) if len(args) > 1 else 0.0
        return f32(mean + f32(args[0]) * z)
    lo, hi = f32(args[0]), f32(args[1])
    return f32(lo + (hi - lo) * ((w[0] >> 8) * 2.0 ** -24))


def main():
    plan_dir, path = sys.argv[1], sys.argv[2]
    with open(os.path.join(plan_dir, "plan.json"), "rb") as f:
        plan_bytes = f.read()
    plan = json.loads(plan_bytes)
    with open(path, "rb") as f:
        blob = f.read()

    failures = []

    def fail(msg):
        failures.append(msg)
        print("FAIL: " + msg)

    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)

    meta = header.pop("__metadata__", {})
    for key in sorted(meta):
        print("metadata %s = %s" % (key, meta[key]))
    expected_meta = {"format": "mtc", "model": plan["model"], "seed": str(plan["seed"]),
                     "plan_sha256": hashlib.sha256(plan_bytes).hexdigest()}
    for key, value in expected_meta.items():
        if meta.get(key) != value:
            fail("metadata %s is %r, expected %r" % (key, meta.get(key), value))

    # Offsets tile the data exactly.
    spans = sorted(tuple(t["data_offsets"]) for t in header.values())
    end = 0
    for b, e in spans:
        if b != end:
            fail("data offsets leave a hole or overlap at byte %d" % b)
        end = e
    if end != len(data):
        fail("tensors end at byte %d of %d" % (end, len(data)))

    params = {p["name"]: p for p in plan["params"]}
    for name in sorted(set(header) - set(params)):
        fail("tensor %s is not a parameter" % name)
    for p in plan["params"]:
        name = p["name"]
        if name not in header:
            fail("parameter %s is missing" % name)
            continue
        t = header[name]
        shape = [d["size"] for d in p["dims"]]
        init = p["init"]
        args = init.get("args", [])
        desc = "%s%s" % (init["kind"], "(%s)" % ", ".join("%g" % a for a in args) if args else "")
        if t["dtype"] != "F32":
            fail("%s has dtype %s" % (name, t["dtype"]))
            continue
        if t["shape"] != shape:
            fail("%s has shape %s, expected %s" % (name, t["shape"], shape))
            continue
        b, e = t["data_offsets"]
        count = (e - b) // 4
        if count != math.prod(shape):
            fail("%s holds %d values for shape %s" % (name, count, shape))
            continue
        values = struct.unpack("<%df" % count, data[b:e])
        mean = sum(values) / count
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / count)
        kind = init["kind"]
        ok = True
        if kind in ("zeros", "ones", "constant"):
            want = {"zeros": 0.0, "ones": 1.0}.get(kind)
            if want is None:
                want = struct.unpack("<f", struct.pack("<f", args[0]))[0]
            ok = all(v == want for v in values)
        elif kind == "normal":
            sd = args[0]
            mu = args[1] if len(args) > 1 else 0.0
            ok = (abs(mean - mu) < 5 * sd / math.sqrt(count) and abs(std / sd - 1) < 0.1 and
                  all(abs(v - mu) <= 5.8 * sd for v in values))
        elif kind == "uniform":
            lo, hi = args
            ok = (all(lo <= v < hi for v in values) and
                  abs(mean - (lo + hi) / 2) < 5 * (hi - lo) / math.sqrt(12 * count))
        else:
            fail("%s has unknown init %s" % (name, kind))
            continue
        if ok and kind in ("normal", "uniform"):
            for i, v in enumerate(values):
                want = expected_value(kind, args, plan["seed"], p["tensor_id"], i)
                if abs(v - want) > 1e-6 * abs(want) + 1e-30:
                    fail("%s[%d] is %r, Philox(seed %d, tensor %d, element %d) gives %r" %
                         (name, i, v, plan["seed"], p["tensor_id"], i, want))
                    break
            else:
                desc += " philox"
            if not desc.endswith("philox"):
                continue
        if not ok:
            fail("%s does not follow %s (mean %g, std %g, min %g, max %g)" %
                 (name, desc, mean, std, min(values), max(values)))
            continue
        print("%s F32 %s %s: ok (mean %.4f, std %.4f)" % (name, shape, desc, mean, std))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
