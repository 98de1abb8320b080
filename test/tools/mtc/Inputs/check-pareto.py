"""Checks `mtc explore`'s Pareto table: rows numbered from 1, step time rising and memory
per rank falling down the table, every row's layout complete.

    check-pareto.py EXPLORE_OUTPUT.txt
"""
import re
import sys

UNIT = {"ms": 1e-3, "s": 1.0}
BYTES = {"MiB": 2 ** 20, "GiB": 2 ** 30}
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"\s+(\d+)\s+([0-9.]+) (ms|s)\s+([0-9.]+)%\s+([0-9.]+) (MiB|GiB)\s+(.*)", line)
    if m:
        rows.append((int(m.group(1)), float(m.group(2)) * UNIT[m.group(3)], float(m.group(5)) * BYTES[m.group(6)],
                     m.group(7).split()))
assert rows, "no Pareto rows"
assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), "rows not numbered 1.."
for a, b in zip(rows, rows[1:]):
    assert a[1] <= b[1], f"row {b[0]} is faster than row {a[0]}"
    assert a[2] >= b[2], f"row {b[0]} needs more memory than row {a[0]}"
assert all(len(r[3]) == 12 for r in rows), "a row's layout has missing columns"
print(f"{len(rows)} rows: step rising, memory falling")
