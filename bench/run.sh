#!/usr/bin/env bash
# CPU training throughput of mtc (build/bin/mtrun) against PyTorch (bench/torch_gpt.py) on the
# same model, initial weights, data, batch shape and thread count. See bench/README.md.
#
#   bench/run.sh                      both sides, gpt-tiny and gpt2-small (seq 128), nproc threads
#   bench/run.sh --torch-only         only the PyTorch side (mtc still compiles the plans and
#                                     mtrun exports the initial weights)
#   bench/run.sh --check              also check torch_gpt.py against the plan's compiled step
#                                     (bench/check_equivalence.py; gpt-tiny only)
#
# Options:
#   --threads T           threads for both sides (default: nproc)
#   --models "A B"        among gpt-tiny gpt2-small (default: both)
#   --steps-tiny N        optimizer steps for gpt-tiny (default 6)
#   --steps-small N       optimizer steps for gpt2-small (default 3)
#   --small-seq S         gpt2-small's sequence length (default 128)
#   --small-batch B       gpt2-small's micro_batch = global_batch (default 2)
#   --out DIR             keep plans, weights, logs and metrics in DIR (default: a new
#                         directory under ${TMPDIR:-/tmp}, printed at the end)
#   --bin DIR             mtc and mtrun from DIR (default: build/bin)
#   --bf16                bf16 mixed precision on both sides (mtc compile --bf16; PyTorch's
#                         CPU autocast to bfloat16)
#   --no-torch-compile    skip the torch.compile side (inductor; needs a C++ compiler)
#
# The first step of each side is left out of its figure (median tokens/s over the others).
# Run it on an otherwise idle machine: a build in the background makes OpenMP threads wait
# on each other and divides the PyTorch figures by ten or more.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/build/bin"
threads="$(nproc)"
models="gpt-tiny gpt2-small"
steps_tiny=6
steps_small=3
small_seq=128
small_batch=2
out=""
torch_only=0
check=0
precision=fp32
torch_compile=1

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --torch-only) torch_only=1 ;;
    --check) check=1 ;;
    --threads) threads="$2"; shift ;;
    --models) models="$2"; shift ;;
    --steps-tiny) steps_tiny="$2"; shift ;;
    --steps-small) steps_small="$2"; shift ;;
    --small-seq) small_seq="$2"; shift ;;
    --small-batch) small_batch="$2"; shift ;;
    --out) out="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    --bf16) precision=bf16 ;;
    --no-torch-compile) torch_compile=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

for tool in mtc mtrun; do
  if [[ ! -x "$bin/$tool" ]]; then
    echo "run.sh: $bin/$tool not found: build the project first (make demo, or ninja -C build)" >&2
    exit 1
  fi
done

bash "$root/bench/setup-venv.sh"
py="${MTC_BENCH_VENV:-$root/bench/.venv}/bin/python"

if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/mtc-bench.XXXXXX")"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

read -r load1 _ < /proc/loadavg
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l > 0.5 * n) }'; then
  echo "run.sh: warning: load average $load1 on $(nproc) cores; the figures will be low" >&2
fi

plan_value() {  # plan_value PLAN KEY: micro_batch (the batch dim) or global_batch
  "$py" -c '
import json, sys
p = json.load(open(sys.argv[1] + "/plan.json"))
micro = p["dims"]["batch"]
print(micro if sys.argv[2] == "micro_batch" else p["train"].get("global_batch", micro))' "$1" "$2"
}

status=0
for model in $models; do
  dir="$out/$model"
  mkdir -p "$dir"
  case "$model" in
    gpt-tiny)
      src="$root/examples/gpt-tiny.mtl"
      steps="$steps_tiny" ;;
    gpt2-small)
      # GPT-2 small as published but with a shorter sequence and a small batch, so that a
      # step takes seconds on a few cores: a copy of the example with three settings changed.
      src="$dir/gpt2-small-seq$small_seq.mtl"
      sed -E -e "s/\\bseq = [0-9]+/seq = $small_seq/" \
             -e "s/global_batch[[:space:]]+[0-9]+/global_batch $small_batch/" \
             -e "s/micro_batch[[:space:]]+[0-9]+/micro_batch $small_batch/" \
             "$root/examples/gpt2-small.mtl" > "$src"
      if ! grep -Eq "\bseq = $small_seq\b" "$src" ||
         ! grep -Eq "global_batch $small_batch([[:space:]]|\$)" "$src" ||
         ! grep -Eq "micro_batch $small_batch([[:space:]]|\$)" "$src"; then
        echo "run.sh: could not set seq/global_batch/micro_batch in $src" >&2
        exit 1
      fi
      steps="$steps_small" ;;
    *) echo "run.sh: unknown model '$model' (gpt-tiny, gpt2-small)" >&2; exit 2 ;;
  esac

  plan="$dir/model.plan"
  weights="$dir/init.safetensors"
  kernels=()
  [[ $precision == bf16 ]] && kernels+=(--bf16)
  if [[ $torch_only == 0 || ($check == 1 && $model == gpt-tiny) ]]; then
    kernels+=(--kernels=x86)
  fi
  echo "== $model: compiling $(basename "$src") ${kernels[*]}" >&2
  rm -rf "$plan"
  "$bin/mtc" compile "$src" -o "$plan" "${kernels[@]}" >&2
  # The initial weights (`--steps 0`: train nothing, write the parameters).
  "$bin/mtrun" "$plan" --steps 0 --export-safetensors "$weights" > "$dir/export.log"
  micro="$(plan_value "$plan" micro_batch)"
  global="$(plan_value "$plan" global_batch)"

  if [[ $torch_only == 0 ]]; then
    echo "== $model: mtrun, $steps steps, $threads threads" >&2
    rm -f "$dir/mtrun.jsonl"   # mtrun appends to an existing metrics file
    if ! "$bin/mtrun" "$plan" --steps "$steps" --threads-per-rank "$threads" \
        --metrics "$dir/mtrun.jsonl" > "$dir/mtrun.log" 2>&1; then
      echo "run.sh: mtrun failed on $model (see $dir/mtrun.log):" >&2
      tail -5 "$dir/mtrun.log" >&2
      status=1
    fi
  fi

  torch_precision=()
  [[ $precision == bf16 ]] && torch_precision=(--bf16)
  sides=(torch)
  [[ $torch_compile == 1 ]] && sides+=(torch-compile)
  for side in "${sides[@]}"; do
    extra=()
    [[ $side == torch-compile ]] && extra=(--compile)
    echo "== $model: $side, $steps steps, $threads threads" >&2
    if ! "$py" "$root/bench/torch_gpt.py" --plan "$plan" --weights "$weights" --steps "$steps" \
        --threads "$threads" --micro-batch "$micro" --global-batch "$global" \
        "${torch_precision[@]}" "${extra[@]}" \
        --json-out "$dir/$side.json" --metrics "$dir/$side.jsonl" > "$dir/$side.log" 2>&1; then
      echo "run.sh: torch_gpt.py ${extra[*]} failed on $model (see $dir/$side.log):" >&2
      tail -5 "$dir/$side.log" >&2
      status=1
    fi
  done

  if [[ $check == 1 && $model == gpt-tiny ]]; then
    echo "== $model: equivalence of torch_gpt.py and the plan's compiled step" >&2
    if ! "$py" "$root/bench/check_equivalence.py" --plan "$plan" --weights "$weights" \
        --threads "$threads" > "$dir/check.log" 2>&1; then
      status=1
    fi
    tail -1 "$dir/check.log" >&2
  fi
done

echo
echo "CPU training throughput, $threads threads ($(nproc) cores), $precision; torch $("$py" -c 'import torch; print(torch.__version__)')"
"$py" "$root/bench/summarize.py" "$out" $models
echo
echo "plans, weights, logs and metrics: $out"
exit $status
