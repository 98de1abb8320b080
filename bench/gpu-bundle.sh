#!/usr/bin/env bash
# Packs what bench/gpu-check.sh needs into one archive, for a machine with a GPU, a CUDA 13
# driver and toolkit libraries and PyTorch, but none of mtc's build dependencies (LLVM,
# Gloo, OpenBLAS, oneDNN, ...): the machines lent to some sessions (bench/README.md, "On a
# GPU"). Run it here, after `make build`; it writes .gpu/bundle.tar.xz (which .gitignore keeps out of git)
# and prints its size.
#
#   bench/gpu-bundle.sh [--out FILE] [--bin DIR]
#
# The archive holds:
#   bin/      mtrun and the CUDA device layer's unit tests (MTCRuntimeDeviceCudaTests)
#   lib/      the CUDA layer mtrun opens (libmtc-cuda.so, beside bin/ as in the build), and
#             every shared library they link but glibc's, libstdc++'s and CUDA's (the GPU machine has
#             its own libcudart, libcublas and libcublasLt, and must: cuBLASLt alone is
#             500 MB)
#   plans/    gpt-tiny, llama-gqa-tiny, mixtral-tiny, gpt-tiny --bf16 and gpt-tiny --tp 2
#             (with and without --sp) compiled with --target=x86,cuda (cubins and PTX for
#             sm_80 and sm_90), and the GPT-2
#             medium-class benchmark model (24 layers, hidden 1024, 16 heads, seq 1024),
#             fp32 and --bf16
#   test-plans/  the unit tests' plans (build/test/plans/gpt-tiny{,-cuda}.plan)
#   test-lib/ the modules CudaLayerTest loads that are not the layer
#   built-paths  what the unit tests read at the path it was built at, one "bundled built"
#             pair per line (gpu-check.sh links the built paths to the bundle's)
#   scripts/  bench/gpu-check.sh, bench/torch_gpt.py, check-metrics.py
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/build/bin"
out="$root/.gpu/bundle.tar.xz"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift ;;
    --bin) bin="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

unit_dir="$root/build/test/unittests/runtime/device/cuda"
unit="$unit_dir/MTCRuntimeDeviceCudaTests"
layer="$bin/../lib/libmtc-cuda.so"
fakes=("$unit_dir/libMTCTestNotACudaLayer.so" "$unit_dir/libMTCTestOtherAbiCudaLayer.so")
plans_dir="$root/build/test/plans"
for f in "$bin/mtc" "$bin/mtrun" "$layer" "$unit" "${fakes[@]}" "$plans_dir/gpt-tiny.plan/MANIFEST" \
         "$plans_dir/gpt-tiny-cuda.plan/MANIFEST"; do
  if [[ ! -e "$f" ]]; then
    echo "gpu-bundle.sh: $f not found: build first (make build; cmake --build build --target" \
         "MTCRuntimeDeviceCudaTests MTCTestPlans)" >&2
    exit 1
  fi
done

stage="$(mktemp -d "${TMPDIR:-/tmp}/mtc-gpu-bundle.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib,plans,test-plans,test-lib,scripts}
cp "$bin/mtrun" "$unit" "$stage/bin/"
cp "$layer" "$stage/lib/"
cp "${fakes[@]}" "$stage/test-lib/"

# The shared libraries, but the C and C++ runtimes (the GPU machine's are newer, and CUDA's
# libraries need theirs) and CUDA's (the GPU machine's own must serve: they go with its
# driver).
ldd "$bin/mtrun" "$layer" "$unit" | awk '/=> \// { print $3 }' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvidia[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

compile() {  # compile NAME SOURCE FLAGS...
  local name="$1" src="$2"
  shift 2
  echo "gpu-bundle.sh: compiling $name" >&2
  "$bin/mtc" compile "$src" -o "$stage/plans/$name.plan" "$@" >&2
}
both=(--target=x86,cuda)
compile gpt-tiny "$root/examples/gpt-tiny.mtl" "${both[@]}"
compile gpt-tiny-bf16 "$root/examples/gpt-tiny.mtl" "${both[@]}" --bf16
compile llama-gqa-tiny "$root/examples/llama-gqa-tiny.mtl" "${both[@]}"
compile mixtral-tiny "$root/examples/mixtral-tiny.mtl" "${both[@]}"
# Two ranks over NCCL (gpu-check.sh's multi-GPU check).
compile gpt-tiny-tp2 "$root/examples/gpt-tiny.mtl" "${both[@]}" --tp 2
compile gpt-tiny-tp2-sp "$root/examples/gpt-tiny.mtl" "${both[@]}" --tp 2 --sp
# GPT-2 medium's shape (355M parameters); the benchmark sets its batch with --global-batch.
medium=(--dim layers=24 --dim hidden=1024 --dim heads=16 --target=cuda)
compile gpt2-medium "$root/examples/gpt2-small.mtl" "${medium[@]}"
compile gpt2-medium-bf16 "$root/examples/gpt2-small.mtl" "${medium[@]}" --bf16

cp -r "$plans_dir/gpt-tiny.plan" "$plans_dir/gpt-tiny-cuda.plan" "$stage/test-plans/"
{
  echo "test-plans $plans_dir"
  echo "lib/libmtc-cuda.so $(realpath "$layer")"
  for fake in "${fakes[@]}"; do echo "test-lib/$(basename "$fake") $fake"; done
} > "$stage/built-paths"
cp "$root/bench/gpu-check.sh" "$root/bench/torch_gpt.py" \
   "$root/test/tools/mtrun/Inputs/check-metrics.py" "$stage/scripts/"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" .
echo "gpu-bundle.sh: wrote $out ($(du -h "$out" | cut -f1))"
