#!/usr/bin/env bash
# Installs every system dependency of mtc from Debian's packages. Idempotent: when everything
# is present it only checks and returns.
set -euo pipefail

packages=(
  cmake ninja-build ccache lld-22 clang-22 libclang-rt-22-dev
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libgtest-dev googletest
  libgloo-dev libopenblas-dev libomp-22-dev
  # bf16 GEMMs on the CPU's bf16 instructions (runtime/exec/GemmBf16.cpp): Debian's
  # OpenBLAS is built without its bf16 GEMM.
  libdnnl-dev
  python3
  # The data tests compare mtc's sample order with numpy's RandomState (test/tools/mtc-data).
  python3-numpy
  # The tokenizers (runtime/data): GPT-2's pattern needs Unicode properties and lookahead
  # (PCRE2); SentencePiece models load through the sentencepiece library. Found by pkg-config.
  pkg-config libpcre2-dev libsentencepiece-dev
  # `mtrun serve`'s HTTP server (tools/mtrun/Serve.cpp): a maintained HTTP/1.1 library
  # rather than a hand-written parser of requests from the network. Found by pkg-config.
  libcpp-httplib-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# lit ships with llvm-22-tools as /usr/lib/llvm-22/bin/lit (a Python script using the
# distribution's lit package).
if [ ! -x /usr/lib/llvm-22/bin/lit ] && ! command -v lit >/dev/null; then
  echo "setup: lit not found after installing llvm-22-tools" >&2
  exit 1
fi
if [ -d "${CUDAToolkit_ROOT:-/usr/local/cuda}" ]; then
  echo "setup: CUDA toolkit found at ${CUDAToolkit_ROOT:-/usr/local/cuda}"
else
  echo "setup: no CUDA toolkit: CUDA targets will not be built"
fi
echo "setup: all dependencies present"
