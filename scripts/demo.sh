#!/usr/bin/env bash
# `make demo`: compile examples/gpt-tiny.mtl and show what the compiler and runtime make of it.
set -euo pipefail
build=${1:-build}
bin="$build/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== mtc compile examples/gpt-tiny.mtl --stats"
"$bin/mtc" compile examples/gpt-tiny.mtl --stats
echo
echo "== mtc compile examples/gpt-tiny.mtl --emit=mt (the first lines of the global graph)"
"$bin/mtc" compile examples/gpt-tiny.mtl --emit=mt | sed -n '1,25p'
echo "   ... ($("$bin/mtc" compile examples/gpt-tiny.mtl --emit=mt | wc -l) lines in all)"
echo
echo "== mtc compile examples/gpt-tiny.mtl -o gpt-tiny.plan   (autodiff + optimizer + plan)"
"$bin/mtc" compile examples/gpt-tiny.mtl -o "$work/gpt-tiny.plan"
cat "$work/gpt-tiny.plan/MANIFEST"
echo
echo "== mtc inspect gpt-tiny.plan"
"$bin/mtc" inspect "$work/gpt-tiny.plan"
echo
echo "== mtrun gpt-tiny.plan --export-safetensors init.safetensors   (Philox initialisation)"
"$bin/mtrun" "$work/gpt-tiny.plan" --export-safetensors "$work/init.safetensors"
ls -l "$work/init.safetensors" | awk '{print "   " $5 " bytes"}'
echo
echo "== gradient check of a small GPT against the float64 reference interpreter"
"$bin/mtc" compile test/compiler/autodiff/gradcheck/gpt-layer.mtl --emit=mt | "$bin/mt-gradcheck" - | tail -1
echo
echo "== the whole training step as x86 code (mt-decompose, mt-outline-parameters, mt-to-linalg, LLVM)"
"$bin/mtc" compile examples/gpt-tiny.mtl --emit=mt-train |
  "$bin/mt-opt" -mt-decompose -mt-outline-parameters |
  "$bin/mtc-codegen" - --target=x86 -o "$work/step.so"
nm -D "$work/step.so" | awk '/_mlir_ciface_/ {print "   " $3}'
echo
echo "== every example parses, verifies and reports its size"
for model in examples/*.mtl; do
  printf '  %-32s ' "$model"
  "$bin/mtc" compile "$model" --stats | grep '^parameters:'
done
echo
echo "Training with mtrun arrives with the executor, which calls these functions (next milestone)."
