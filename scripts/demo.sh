#!/usr/bin/env bash
# `make demo`: compile examples/gpt-tiny.mtl and show what the compiler made of it.
set -euo pipefail
build=${1:-build}
mtc="$build/bin/mtc"

echo "== mtc compile examples/gpt-tiny.mtl --stats"
"$mtc" compile examples/gpt-tiny.mtl --stats
echo
echo "== mtc compile examples/gpt-tiny.mtl --emit=mt (the layer body and the entry function)"
"$mtc" compile examples/gpt-tiny.mtl --emit=mt | sed -n '1,60p'
echo "   ... ($("$mtc" compile examples/gpt-tiny.mtl --emit=mt | wc -l) lines in all)"
echo
echo "== every example parses, verifies and reports its size"
for model in examples/*.mtl; do
  printf '  %-32s ' "$model"
  "$mtc" compile "$model" --stats | grep '^parameters:'
done
