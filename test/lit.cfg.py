# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "mtc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".mtl", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mtc_obj_root, "test")
# GoogleTest binaries have their own suite (unittests/lit.cfg.py); inputs are not tests.
config.excludes = ["unittests", "Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mtc_src_root", config.mtc_src_root))
config.substitutions.append(("%mtc_obj_root", config.mtc_obj_root))
config.substitutions.append(("%examples", os.path.join(config.mtc_src_root, "examples")))
# Read-only: tests write their checkpoints and outputs under %t.
config.substitutions.append(("%gpt_tiny_plan", config.gpt_tiny_plan))
config.substitutions.append(("%plans", config.test_plans_dir))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.mtc_tools_dir, config.llvm_tools_dir]
tools = [
    ToolSubst("mtc", unresolved="fatal"),
    ToolSubst("mt-opt", unresolved="fatal"),
    ToolSubst("mt-gradcheck", unresolved="fatal"),
    ToolSubst("mtc-codegen", unresolved="fatal"),
    ToolSubst("mtrun", unresolved="fatal"),
    ToolSubst("mtc-data", unresolved="fatal"),
    ToolSubst("mtc-hf", unresolved="fatal"),
    ToolSubst("not", unresolved="fatal"),
    ToolSubst("count", unresolved="fatal"),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.mtc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# lit runs tests side by side on every core: a rank's kernels and GEMMs run on one thread
# unless the test asks for more (mtrun --threads-per-rank).
config.environment["OMP_NUM_THREADS"] = "1"

# ptxas assembles generated PTX where the CUDA toolkit is installed (`REQUIRES: ptxas`).
if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))

# A CUDA GPU this process can use (`REQUIRES: cuda-device`, test/gpu/): nvidia-smi lists one.
# Without it the GPU-executing tests are skipped, and the tests of mtrun's refusals run.
# Two of them (`REQUIRES: cuda-devices-2`): the multi-rank tests over NCCL, one rank per GPU.
def _cuda_device_count():
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True)
    if listed.returncode != 0:
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))


_cuda_devices = _cuda_device_count()
if _cuda_devices >= 1:
    config.available_features.add("cuda-device")
if _cuda_devices >= 2:
    config.available_features.add("cuda-devices-2")

# The CPU's bf16 matrix instructions (`REQUIRES: cpu-bf16`): AVX512-BF16 or AMX-BF16, which
# oneDNN uses for the runtime's bf16 GEMM (runtime/exec/GemmBf16.cpp).
def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


if _cpu_flags() & {"avx512_bf16", "amx_bf16"}:
    config.available_features.add("cpu-bf16")

# Two-"node" tests put ranks in network namespaces joined by a veth pair (`REQUIRES: netns`):
# available where this process may create them (root, or CAP_SYS_ADMIN and CAP_NET_ADMIN).
def _can_make_network_namespaces():
    import shutil
    import subprocess
    ip = shutil.which("ip")
    if not ip:
        return False
    name = f"mtc-lit-probe-{os.getpid()}"
    made = subprocess.run([ip, "netns", "add", name], capture_output=True).returncode == 0
    if made:
        subprocess.run([ip, "netns", "del", name], capture_output=True)
    return made


if _can_make_network_namespaces():
    config.available_features.add("netns")
