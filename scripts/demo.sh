#!/usr/bin/env bash
# `make demo`: compile examples/gpt-tiny.mtl, train it on one CPU rank and show the loss falling,
# then the same on 4 ranks (tensor parallel 2 with sequence parallelism x data parallel 2), then
# on real text (a BPE-tokenized indexed dataset, with evaluation) and generate from it.
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
echo "== mtc compile examples/gpt-tiny.mtl -o gpt-tiny.plan --kernels=x86   (autodiff, optimizer, x86 step)"
"$bin/mtc" compile examples/gpt-tiny.mtl -o "$work/gpt-tiny.plan" --kernels=x86
cat "$work/gpt-tiny.plan/MANIFEST"
echo
echo "== mtc inspect gpt-tiny.plan"
"$bin/mtc" inspect "$work/gpt-tiny.plan"
echo
echo "== mtrun gpt-tiny.plan   (train on one CPU rank, on the built-in synthetic task)"
"$bin/mtrun" "$work/gpt-tiny.plan" --log-every 20 --metrics "$work/metrics.jsonl" \
  --save "$work/checkpoint" --export-safetensors "$work/trained.safetensors"
echo
echo "== the loss curve (scripts/plot-loss.py; also written to ${DEMO_PLOT:-build/demo-loss.svg})"
python3 scripts/plot-loss.py "$work/metrics.jsonl" "${DEMO_PLOT:-$build/demo-loss.svg}"
echo
echo "== tensor x data parallel: mtc compile ... --tp 2 --sp (the compiler derives the collectives),"
echo "   mtrun --nodes 2 --ranks-per-node 2 (tp2 x dp2 on 4 local ranks, Gloo over TCP), first 20 steps"
"$bin/mtc" compile examples/gpt-tiny.mtl -o "$work/gpt-tiny-tp2.plan" --kernels=x86 --tp 2 --sp
"$bin/mtrun" "$work/gpt-tiny-tp2.plan" --nodes 2 --ranks-per-node 2 --steps 20 --log-every 5 \
  --metrics "$work/tp2dp2.jsonl"
python3 - "$work/metrics.jsonl" "$work/tp2dp2.jsonl" <<'PY'
import json, sys
one, four = ([json.loads(line) for line in open(path)] for path in sys.argv[1:])
print("   step  loss (1 rank)        loss (tp2 x dp2)     relative difference")
for a, b in zip(one, four):
    print(f"   {a['step']:4d}  {a['loss']:.15f}  {b['loss']:.15f}  {abs(a['loss'] - b['loss']) / abs(a['loss']):.1e}")
PY
echo
echo "== real text: Debian's license texts -> GPT-2-style BPE -> Megatron indexed dataset -> train"
echo "   with a validation split -> generate (the BPE is the small one of the tokenizer tests,"
echo "   1,961 ids trained on the GPL; GPT-2's own vocab.json/merges.txt work the same way)"
bpe=test/tools/mtc-data/Inputs/tokenizers
tokenizer=(--tokenizer-type GPT2BPETokenizer --vocab-file "$bpe/gpt2-vocab.json" --merge-file "$bpe/gpt2-merges.txt")
python3 scripts/text-to-jsonl.py "$work/licenses.jsonl" /usr/share/common-licenses/*
"$bin/mtc-data" preprocess --input "$work/licenses.jsonl" --output-prefix "$work/licenses" --append-eod \
  "${tokenizer[@]}"
vocab=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$bpe/gpt2-vocab.json")
"$bin/mtc" compile examples/gpt-tiny.mtl --dim vocab="$vocab" -o "$work/gpt-tiny-bpe.plan" > /dev/null
"$bin/mtrun" "$work/gpt-tiny-bpe.plan" --data-path "$work/licenses" --split 949,50,1 \
  --eval-interval 50 --eval-iters 4 --log-every 50 --save "$work/bpe-checkpoint"
"$bin/mtrun" generate "$work/gpt-tiny-bpe.plan" --load "$work/bpe-checkpoint" "${tokenizer[@]}" \
  --prompt "Everyone is permitted to copy" --max-new-tokens 40 --temperature 0.8 --top-k 40 --seed 1
echo
echo

echo "== gradient check of a small GPT against the float64 reference interpreter"
"$bin/mtc" compile test/compiler/autodiff/gradcheck/gpt-layer.mtl --emit=mt | "$bin/mt-gradcheck" - | tail -1
echo
echo "== every example parses, verifies and reports its size"
for model in examples/*.mtl; do
  printf '  %-32s ' "$model"
  "$bin/mtc" compile "$model" --stats | grep '^parameters:'
done
echo
