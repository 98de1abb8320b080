#!/usr/bin/env bash
# Step time, bubble and memory of each pipeline schedule on this host's CPU ranks, against
# one rank training the same model (bench/README.md, "Pipeline schedules").
#
#   bench/pipeline.sh [--model bench/pipeline-gpt.mtl] [--steps 10] [--threads 1]
#                     [--pp "2 4"] [--schedules "gpipe 1f1b interleaved zb-h1 zb-v"]
#                     [--out bench/out-pipeline]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

model=bench/pipeline-gpt.mtl
steps=10
threads=1
pps="2 4"
schedules="gpipe 1f1b interleaved zb-h1 zb-v"
out=bench/out-pipeline
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --pp) pps=$2; shift 2 ;;
    --schedules) schedules=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "bench/pipeline.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
for tool in build/bin/mtc build/bin/mtrun; do
  [[ -x $tool ]] || { echo "bench/pipeline.sh: $tool is missing: build the project first" >&2; exit 1; }
done
[[ -f $model ]] || { echo "bench/pipeline.sh: no model file '$model'" >&2; exit 1; }
[[ $steps =~ ^[0-9]+$ && $steps -ge 2 ]] ||
  { echo "bench/pipeline.sh: --steps must be at least 2 (the first step is not counted)" >&2; exit 1; }
[[ $threads =~ ^[1-9][0-9]*$ ]] ||
  { echo "bench/pipeline.sh: --threads must be a positive integer, not '$threads'" >&2; exit 1; }
for pp in $pps; do
  [[ $pp =~ ^[1-9][0-9]*$ && $pp -ge 2 ]] ||
    { echo "bench/pipeline.sh: a pipeline degree in --pp must be at least 2, not '$pp'" >&2; exit 1; }
done
for schedule in $schedules; do
  case "$schedule" in
    gpipe|1f1b|interleaved|zb-h1|zb-v) ;;
    *) echo "bench/pipeline.sh: unknown schedule '$schedule' (gpipe, 1f1b, interleaved, zb-h1, zb-v)" >&2
       exit 1 ;;
  esac
done
mkdir -p "$out" || exit 1
cores=$(nproc)   # before OMP_NUM_THREADS is set: nproc obeys it
: >"$out/configs"   # this run's configurations, in order, for the summary
# Each rank runs its kernels and GEMMs on mtrun --threads-per-rank threads; the environment
# keeps OpenBLAS's and any OpenMP pool at the same count, so that a pp2 job's two ranks use
# one core each.
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads

# Runs one configuration into $out/NAME: compile (mtc flags), draw the schedule, train (mtrun
# flags). A failure is logged in NAME/failed and the benchmark goes on with the next one.
run_config() {
  local name=$1 compile_flags=$2 run_flags=$3 dir="$out/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  echo "$name" >>"$out/configs"
  echo "$name: compiling" >&2
  # shellcheck disable=SC2086
  if ! build/bin/mtc compile "$model" -o "$dir/model.plan" --kernels=x86 $compile_flags \
       >"$dir/compile.log" 2>&1; then
    echo "mtc compile $compile_flags failed (compile.log)" >"$dir/failed"
    return
  fi
  if [[ $compile_flags == *--pp* ]]; then
    build/bin/mtc inspect "$dir/model.plan" --schedule >"$dir/schedule.txt" 2>&1
  fi
  echo "$name: training $steps steps" >&2
  # shellcheck disable=SC2086
  if ! build/bin/mtrun "$dir/model.plan" $run_flags --steps "$steps" --metrics "$dir/metrics.jsonl" \
       --trace "$dir/trace.json" >"$dir/mtrun.log" 2>&1; then
    echo "mtrun $run_flags failed (mtrun.log)" >"$dir/failed"
  fi
}

# The references: one rank with the ranks' thread count, and with every core.
run_config "one-t$threads" "" "--threads-per-rank $threads"
[[ $cores != "$threads" ]] && run_config "one-t$cores" "" "--threads-per-rank $cores"
for pp in $pps; do
  for schedule in $schedules; do
    flags="--pp $pp --schedule $schedule"
    [[ $schedule == interleaved ]] && flags+=" --virtual-stages 2"
    run_config "pp$pp-$schedule" "$flags" "--nodes $pp --threads-per-rank $threads"
  done
done

python3 bench/summarize_pipeline.py "$out" --threads "$threads"
