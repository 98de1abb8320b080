#!/usr/bin/env bash
# Creates bench/.venv with a CPU build of PyTorch, safetensors and numpy, for the PyTorch side
# of the training-throughput benchmark (bench/README.md). Idempotent: a venv whose packages
# already import is left as it is, so bench/run.sh calls this every time at no cost.
#
#   bash bench/setup-venv.sh            # create or complete bench/.venv
#   MTC_BENCH_VENV=/path bash ...       # another location
#   PYTHON=python3.12 bash ...          # another interpreter for the venv
#   MTC_BENCH_TRANSFORMERS=1 bash ...   # also transformers, for bench/hf_check.py
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${MTC_BENCH_VENV:-$here/.venv}"
python="${PYTHON:-python3}"

have() { "$venv/bin/python" -c "import $1" >/dev/null 2>&1; }
want_transformers="${MTC_BENCH_TRANSFORMERS:-0}"

if [[ -x "$venv/bin/python" ]] && have torch && have safetensors && have numpy &&
  { [[ "$want_transformers" != 1 ]] || have transformers; }; then
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup-venv: creating $venv" >&2
  if ! "$python" -m venv "$venv"; then
    echo "setup-venv: '$python -m venv' failed; on Debian: apt-get install python3-venv" >&2
    exit 1
  fi
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)

if ! have torch; then
  # The CPU-only wheel (about 200 MB) from PyTorch's own index; plain PyPI's Linux wheel is
  # the CUDA build, which works on a CPU too but pulls several GB of nvidia-* packages.
  echo "setup-venv: installing torch (CPU build)" >&2
  if ! "${pip[@]}" --retries 1 --timeout 30 --index-url https://download.pytorch.org/whl/cpu torch
  then
    echo "setup-venv: PyTorch's CPU index is not reachable; installing torch from PyPI" >&2
    "${pip[@]}" torch
  fi
fi
if ! have safetensors || ! have numpy; then
  echo "setup-venv: installing safetensors and numpy" >&2
  "${pip[@]}" safetensors numpy
fi
if [[ "$want_transformers" == 1 ]] && ! have transformers; then
  echo "setup-venv: installing transformers" >&2
  "${pip[@]}" transformers
fi

"$venv/bin/python" - <<'PY'
import numpy, safetensors, torch
print(f"setup-venv: torch {torch.__version__} (CPU capability "
      f"{torch.backends.cpu.get_cpu_capability()}, MKL {torch.backends.mkl.is_available()}), "
      f"numpy {numpy.__version__}, safetensors {safetensors.__version__}")
PY
