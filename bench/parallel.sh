#!/usr/bin/env bash
# Step time and communication of one model under each parallel layout, at a fixed global
# batch, on this host's CPU ranks (bench/README.md, "Parallel layouts").
#
#   bench/parallel.sh [--layouts dense|moe|context] [--model M] [--global-batch N]
#                     [--steps 12] [--threads 1] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

layout_set=dense
model=
global_batch=
steps=12
threads=1
out=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --layouts) layout_set=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --global-batch) global_batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "bench/parallel.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
for tool in build/bin/mtc build/bin/mtrun; do
  [[ -x $tool ]] || { echo "bench/parallel.sh: $tool is missing: build the project first" >&2; exit 1; }
done
if [[ -z $out ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# name | compile flags | mtrun ranks
case "$layout_set" in
  dense)
    : "${model:=examples/gpt-tiny.mtl}" "${global_batch:=32}"
    layouts=(
      "one||--nodes 1"
      "dp2||--nodes 2"
      "dp4||--nodes 2 --ranks-per-node 2"
      "tp2|--tp 2|--nodes 2"
      "tp2+sp|--tp 2 --sp|--nodes 2"
      "tp4|--tp 4|--nodes 4"
      "tp2xdp2|--tp 2|--nodes 2 --ranks-per-node 2"
      "tp2xdp2+sp+distopt|--tp 2 --sp --dp 2 --use-distributed-optimizer|--nodes 2 --ranks-per-node 2"
    ) ;;
  moe)
    : "${model:=examples/mixtral-tiny.mtl}" "${global_batch:=16}"
    layouts=(
      "one||--nodes 1"
      "dp2||--nodes 2"
      "ep2|--ep 2|--nodes 2"
      "ep4|--ep 4|--nodes 4"
      "ep2xtp2+sp|--ep 2 --tp 2 --sp|--nodes 4"
      "ep2xtp2+sp+etp1|--ep 2 --tp 2 --sp --etp 1|--nodes 4"
      "ep2xdp2|--ep 2|--nodes 4"
      "ep2xpp2|--ep 2 --pp 2|--nodes 4"
    ) ;;
  context)
    : "${model:=bench/context-gpt.mtl}" "${global_batch:=8}"
    layouts=(
      "one||--nodes 1"
      "dp2||--nodes 2"
      "cp2|--cp 2|--nodes 2"
      "cp2-p2p|--cp 2 --cp-comm-type p2p|--nodes 2"
      "cp4|--cp 4|--nodes 4"
      "cp4-p2p|--cp 4 --cp-comm-type p2p|--nodes 4"
      "cp2xtp2|--cp 2 --tp 2|--nodes 4"
      "cp2xdp2|--cp 2|--nodes 4"
      "cp2xpp2|--cp 2 --pp 2|--nodes 4"
    ) ;;
  *) echo "bench/parallel.sh: --layouts must be dense, moe or context, not '$layout_set'" >&2; exit 1 ;;
esac

declare -A compiled
for layout in "${layouts[@]}"; do
  IFS='|' read -r name flags ranks <<<"$layout"
  plan="$out/plan${flags// /_}.plan"
  if [[ -z ${compiled[$plan]:-} ]]; then
    # shellcheck disable=SC2086
    build/bin/mtc compile "$model" -o "$plan" --kernels=x86 $flags >/dev/null
    compiled[$plan]=1
  fi
  # shellcheck disable=SC2086
  build/bin/mtrun "$plan" $ranks --steps "$steps" --global-batch "$global_batch" \
    --threads-per-rank "$threads" --metrics "$out/$name.jsonl" >"$out/$name.log"
  # mtrun predicts rank 0's bytes on its communication line, a pipeline plan's per stage on
  # the pipeline communication line (rank 0 runs stage 0: the first); "-" on one rank.
  predicted=$(grep -E '^(pipeline )?communication:' "$out/$name.log" |
                grep -o -m1 'predicted [0-9.]* MiB' | head -n 1 || true)
  echo "$name|${predicted:-predicted - MiB}"
done | python3 -c '
import json, statistics, sys
out = sys.argv[1]
header = ("layout", "ms/step", "tok/s", "MiB sent/step (rank 0)", "predicted", "peak MiB/rank")
print("{:<20} {:>8} {:>8} {:>23} {:>10} {:>14}".format(*header))
for line in sys.stdin:
    name, predicted = line.strip().split("|")
    steps = [json.loads(l) for l in open(f"{out}/{name}.jsonl")][1:]
    ms = statistics.median(s["step_ms"] for s in steps)
    tok = statistics.median(s["tokens_per_s"] for s in steps)
    sent = statistics.mean(s["comm_bytes_sent"] for s in steps) / 2**20
    peak = max(s["peak_bytes"] for s in steps) / 2**20
    print(f"{name:<20} {ms:8.1f} {tok:8.0f} {sent:23.2f} {predicted.split()[1]:>10} {peak:14.1f}")
' "$out"
