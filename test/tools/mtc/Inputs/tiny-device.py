"""Writes a copy of a cluster preset's file whose devices hold `bytes` (no model fits).

    tiny-device.py PRESET.json BYTES OUT.json
"""
import json
import sys

cluster = json.load(open(sys.argv[1]))
cluster["name"] = "tiny-device"
cluster["device"]["memory_bytes"] = int(sys.argv[2])
json.dump(cluster, open(sys.argv[3], "w"), indent=1)
