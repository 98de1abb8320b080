#!/usr/bin/env bash
# Generation throughput of `mtrun generate` with the KV cache (prefill + decode_step) and
# without it (--no-kv-cache: the whole window per token), on one plan: new tokens per second
# of wall time, the best of --repeats runs of each (the process's start, the plan's loading
# and the prompt's prefill included, so short generations understate the cache's gain).
set -euo pipefail

usage() {
  cat <<USAGE
usage: bench/generate.sh [--plan PLAN] [--tokens N] [--repeats R] [--threads T] [--nodes N]

  --plan PLAN     a compiled plan (default: build/test/plans/gpt-tiny.plan)
  --tokens N      new tokens per run (default 59: the prompt "hello" fills gpt-tiny's 64)
  --repeats R     runs of each path, the fastest kept (default 3)
  --threads T     --threads-per-rank (default 1)
  --nodes N       ranks (default 1; a tensor-parallel plan needs a multiple of its tp)
USAGE
}

plan=build/test/plans/gpt-tiny.plan tokens=59 repeats=3 threads=1 nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --plan) plan=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/generate.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[ -d "$plan" ] || { echo "bench/generate.sh: no plan '$plan' (build the test plans or give --plan)" >&2; exit 1; }
mtrun=build/bin/mtrun
[ -x "$mtrun" ] || { echo "bench/generate.sh: no $mtrun (build the project first)" >&2; exit 1; }

run() { # the best wall seconds of $repeats runs of mtrun generate with "$@"
  local best=""
  for _ in $(seq "$repeats"); do
    local start end
    start=$(date +%s.%N)
    if ! "$mtrun" generate "$plan" --steps 0 --prompt hello --max-new-tokens "$tokens" \
      --ignore-eod --threads-per-rank "$threads" --nodes "$nodes" "$@" > /dev/null 2> "$err"; then
      echo "bench/generate.sh: mtrun generate $plan $* failed:" >&2
      cat "$err" >&2
      return 1
    fi
    end=$(date +%s.%N)
    best=$(python3 -c "import sys; t=float(sys.argv[2])-float(sys.argv[1]); b=sys.argv[3]; print(t if not b or t < float(b) else b)" "$start" "$end" "$best")
  done
  echo "$best"
}

err=$(mktemp)
trap 'rm -f "$err"' EXIT
cached=$(run)
window=$(run --no-kv-cache)
python3 - "$tokens" "$cached" "$window" <<PY
import sys
tokens, cached, window = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"{tokens} new tokens: KV cache {cached:.3f} s ({tokens / cached:.0f} tokens/s), "
      f"window path {window:.3f} s ({tokens / window:.0f} tokens/s), x{window / cached:.1f}")
PY
