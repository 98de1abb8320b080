#!/usr/bin/env bash
# Builds the seed corpora of the runtime's fuzz targets (see docs/fuzzing.md).
#
#   runtime/fuzz/make-seed-corpus.sh MTC FUZZ_BIN_DIR [OUT_DIR]    # default OUT_DIR: fuzz-corpus
#
# MTC is an mtc binary (e.g. build/bin/mtc), FUZZ_BIN_DIR the fuzzers' directory (e.g.
# build-fuzz/bin). Writes
#   OUT_DIR/plan-seeds/        plan.json and MANIFEST of plans compiled from the examples
#                              (with and without tensor parallelism and the x86 kernels' calling
#                              convention), for plan-loader-fuzzer
#   OUT_DIR/checkpoint-seeds/  checkpoints of checkpoint-fuzzer's fixed plan, written by the
#                              runtime's own saveCheckpoint (checkpoint-fuzzer -mtc_write_seeds)
# Seeds are generated, not stored in the repository, so they follow the formats as they change.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,/^set/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mtc="$1"
bin="$2"
out="${3:-$root/fuzz-corpus}"
mkdir -p "$out/plan-seeds" "$out/checkpoint-seeds"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

count=0
plan() { # plan NAME MODEL MTC-FLAGS...: compiles MODEL and keeps its plan.json and MANIFEST
  local name="$1" model="$2"
  shift 2
  "$mtc" compile "$root/examples/$model.mtl" -o "$work/$name.plan" "$@" >/dev/null
  cp "$work/$name.plan/plan.json" "$out/plan-seeds/$name.plan.json"
  cp "$work/$name.plan/MANIFEST" "$out/plan-seeds/$name.MANIFEST"
  count=$((count + 2))
}
plan gpt-tiny-x86 gpt-tiny --kernels=x86
plan gpt-tiny-tp2-sp gpt-tiny --kernels=none --tp 2 --sp
plan gpt-tiny-dp2-distopt gpt-tiny --kernels=none --dp 2 --use-distributed-optimizer
plan llama-gqa-tiny-tp2 llama-gqa-tiny --kernels=none --tp 2
plan mixtral-tiny mixtral-tiny --kernels=none
# A pipeline schedule (plan.json's "pipeline"): the hand-written 1F1B of mtc inspect's test.
python3 - "$out/plan-seeds" "$root/test/tools/mtc/Inputs/pipeline-1f1b.json" <<'PY'
import json, sys
seeds, pipeline = sys.argv[1], sys.argv[2]
plan = json.load(open(f"{seeds}/gpt-tiny-x86.plan.json"))
plan["pipeline"] = json.load(open(pipeline))
json.dump(plan, open(f"{seeds}/gpt-tiny-pipeline.plan.json", "w"), indent=2)
PY
count=$((count + 1))
echo "make-seed-corpus: $count plan seeds in $out/plan-seeds"

"$bin/checkpoint-fuzzer" -mtc_write_seeds="$out/checkpoint-seeds"
