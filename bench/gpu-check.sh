#!/usr/bin/env bash
# The GPU checks and benchmark in one run, on a machine with a GPU (bench/README.md, "On a
# GPU"): unpacks the archive bench/gpu-bundle.sh made, then
#   1. the CUDA device layer's unit tests (CudaTrainer against the CPU's Trainer among them);
#   2. 20 steps of gpt-tiny, llama-gqa-tiny and mixtral-tiny with --device cuda against the
#      same plan on the CPU: every loss within 1.78e-6 relative (1e-5 on losses up to 5.6;
#      fp32, TF32 off), and gpt-tiny --bf16 within bf16's 4e-5 relative (2e-4 absolute);
#   2b. with two GPUs or more: gpt-tiny on two ranks over NCCL (`--nodes 2`: data
#      parallelism, --tp 2, --tp 2 --sp) against the same plan on two CPU ranks over Gloo,
#      every loss within 1.78e-6 relative; skipped, and said so, with one GPU;
#   3. the benchmark: GPT-2 medium's shape (seq 1024, micro-batch 8) on mtrun --device cuda
#      and on PyTorch eager and torch.compile on the same GPU, fp32 (TF32 off) and bf16;
#      tokens/s and MFU (model FLOPs, Megatron's formula without recomputation, over the
#      H100/H200 dense bf16 peak of 989 TFLOP/s, and for fp32 over the 67 TFLOP/s fp32 peak).
# Everything it prints also goes to $OUT/gpu-check.log (where the device tool collects
# files; /tmp/mtc-gpu-out elsewhere). It goes on after a failed check and exits non-zero
# at the end if any failed.
#
#   bash bench/gpu-check.sh [ARCHIVE]          (default .gpu/bundle.tar.xz)
set -uo pipefail

archive="${1:-.gpu/bundle.tar.xz}"
out="${OUT:-/tmp/mtc-gpu-out}"
work=/tmp/mtc-gpu
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf "$archive" || {
  echo "gpu-check.sh: cannot unpack $archive"; exit 1; }

# CUDA's libraries: the toolkit's, else the ones PyTorch's wheels bring.
cuda_libs=/usr/local/cuda/lib64
py_libs="$(python3 -c 'import os, nvidia.cublas as c, nvidia.cuda_runtime as r
print(":".join(os.path.join(os.path.dirname(m.__file__), "lib") for m in (c, r)))' 2>/dev/null || true)"
# Only mtc's programs see the bundled libraries (PyTorch keeps its own).
mtc_libs="$work/lib:$cuda_libs:$py_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mtrun() { LD_LIBRARY_PATH="$mtc_libs" "$work/bin/mtrun" "$@"; }
MTCRuntimeDeviceCudaTests() { LD_LIBRARY_PATH="$mtc_libs" "$work/bin/MTCRuntimeDeviceCudaTests" "$@"; }
export PYTHONUNBUFFERED=1
status=0
fail() { echo "gpu-check.sh: FAILED: $*"; status=1; }

nvidia-smi -L || fail "nvidia-smi"
LD_LIBRARY_PATH="$mtc_libs" ldd "$work/bin/mtrun" | grep "not found" &&
  fail "mtrun has unresolved libraries"

echo "== 1. unit tests"
# The tests read their plans and modules at the paths they were built at (left alone where
# they exist: the machine that built them).
while read -r bundled built; do
  [[ -e "$built" ]] || { mkdir -p "$(dirname "$built")" && ln -s "$work/$bundled" "$built"; }
done < "$work/built-paths"
MTCRuntimeDeviceCudaTests --gtest_brief=1 || fail "MTCRuntimeDeviceCudaTests"

echo "== 2. one GPU against the CPU, 20 steps"
for case in "gpt-tiny 1.78e-6" "llama-gqa-tiny 1.78e-6" "mixtral-tiny 1.78e-6" "gpt-tiny-bf16 4e-5"; do
  set -- $case
  plan="$work/plans/$1.plan" runs="$work/runs/$1"
  mkdir -p "$runs"
  mtrun "$plan" --device cpu --steps 20 --log-every 10 --metrics "$runs/cpu.jsonl" > "$runs/cpu.log" 2>&1 ||
    { tail -3 "$runs/cpu.log"; fail "$1 on the CPU"; continue; }
  mtrun "$plan" --device cuda --steps 20 --log-every 10 --metrics "$runs/gpu.jsonl" 2>&1 | tee "$runs/gpu.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || { fail "$1 on the GPU"; continue; }
  python3 "$work/scripts/check-metrics.py" "$runs/gpu.jsonl" --steps 20 \
    --close-losses "$runs/cpu.jsonl" --rtol "$2" || fail "$1: GPU losses against the CPU's"
done

echo "== 2b. two GPUs over NCCL against two CPU ranks, 20 steps"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
if (( gpus < 2 )); then
  echo "gpu-check.sh: skipped: $gpus GPU(s) visible, the multi-rank check needs 2"
else
  for name in gpt-tiny gpt-tiny-tp2 gpt-tiny-tp2-sp; do
    plan="$work/plans/$name.plan" runs="$work/runs/$name-nodes2"
    mkdir -p "$runs"
    mtrun "$plan" --device cpu --nodes 2 --steps 20 --log-every 10 \
      --metrics "$runs/cpu.jsonl" > "$runs/cpu.log" 2>&1 ||
      { tail -3 "$runs/cpu.log"; fail "$name on two CPU ranks"; continue; }
    # A hung rank ends the job within --comm-timeout rather than the device lease.
    mtrun "$plan" --device cuda --nodes 2 --comm-timeout 120 --steps 20 --log-every 10 \
      --metrics "$runs/gpu.jsonl" 2>&1 | tee "$runs/gpu.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || { fail "$name on two GPUs"; continue; }
    python3 "$work/scripts/check-metrics.py" "$runs/gpu.jsonl" --steps 20 \
      --close-losses "$runs/cpu.jsonl" --rtol 1.78e-6 ||
      fail "$name: two GPUs' losses against two CPU ranks'"
  done
fi

echo "== 3. benchmark: GPT-2 medium's shape, seq 1024, micro-batch 8"
bench="$work/runs/bench" plan="$work/plans/gpt2-medium.plan"
mkdir -p "$bench"
mtrun "$plan" --device cuda --steps 0 --export-safetensors "$bench/init.safetensors" > /dev/null ||
  fail "exporting the benchmark's initial weights"
for precision in fp32 bf16; do
  torch_flags=() mtc_plan="$plan"
  [[ $precision == bf16 ]] && torch_flags=(--bf16) mtc_plan="$work/plans/gpt2-medium-bf16.plan"
  mtrun "$mtc_plan" --device cuda --steps 6 --global-batch 8 --log-every 1 \
    --metrics "$bench/mtc-$precision.jsonl" 2>&1 | tail -4
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "mtrun benchmark ($precision)"
  for side in eager compile; do
    extra=()
    [[ $side == compile ]] && extra=(--compile)
    python3 "$work/scripts/torch_gpt.py" --plan "$plan" --weights "$bench/init.safetensors" \
      --device cuda --steps 6 --micro-batch 8 --global-batch 8 --quiet "${torch_flags[@]}" \
      "${extra[@]}" --json-out "$bench/torch-$side-$precision.json" > /dev/null ||
      fail "torch $side ($precision)"
  done
done
python3 - "$bench" "$plan" <<'PY'
import json, os, statistics, sys
bench, plan = sys.argv[1], json.load(open(os.path.join(sys.argv[2], "plan.json")))
d = plan["dims"]
L, h, s, V = d.get("layers", 24), d["hidden"], d["seq"], d["vocab"]
# Megatron's model FLOPs per token (forward and backward, no recomputation).
flops_per_token = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * h * L)) / 1
peaks = {"fp32": 67e12, "bf16": 989e12}
def median_tps(path):
    if path.endswith(".json"):
        return json.load(open(path))["tokens_per_s"]
    rows = [json.loads(l) for l in open(path)]
    return statistics.median(r["tokens_per_s"] for r in rows[1:] if "tokens_per_s" in r)
print(f"{'side':28} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU (bf16 peak)':>16} {'MFU (own peak)':>15}")
for name in sorted(os.listdir(bench)):
    if not (name.startswith("mtc-") or name.startswith("torch-")) or name.endswith(".safetensors"):
        continue
    precision = "bf16" if "bf16" in name else "fp32"
    tps = median_tps(os.path.join(bench, name))
    tf = tps * flops_per_token
    print(f"{name:28} {tps:10.0f} {tf / 1e12:8.1f} {tf / peaks['bf16']:16.1%} {tf / peaks[precision]:15.1%}")
PY
[[ $status == 0 ]] && echo "gpu-check.sh: all checks passed" || echo "gpu-check.sh: some checks FAILED"
exit $status
