//===- Passes.td - GPU backend passes ----------------------*- tablegen -*-===//
//
// The passes that make the host side of a CUDA step: x86 code that launches the kernels
// (GPUCodegen.h, "Host code").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_GPU_PASSES_TD
#define MTC_COMPILER_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def GPULaunchesToCallsPass : Pass<"mtc-gpu-launches-to-calls", "::mlir::ModuleOp"> {
  let summary = "Launch each outlined kernel through the runtime's mtc_gpu_launch";
  let description = [{
    On the host functions of a step after kernel outlining (compileStepKernels): each
    `gpu.launch_func @mtc_kernels::@k blocks in (gx, gy, gz) threads in (bx, by, bz)
    args(...)` becomes a call of the runtime import `mtc_gpu_launch`
    (runtime/exec/KernelABI.h), the counterpart of upstream's `mgpuLaunchKernel` in
    gpu-to-llvm, with the kernel's name as a string instead of a loaded function:

      func.call @mtc_gpu_launch(%name, %gx, %gy, %gz, %bx, %by, %bz, %args, %count)
        : (!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64) -> ()

    `%args` is a stack array of one i64 word per kernel parameter: a buffer's aligned
    address (the kernels take bare pointers, so a buffer must have an identity layout) or
    a scalar zero-extended from its bits. The gpu.modules are erased: the kernels are in
    the plan's PTX, and what remains is host code for the CPU backend's lowering
    (mtc-gpu-host-to-llvm-pipeline). mtc-thread-kernel-context later passes the context
    first.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def GPUHostImportsPass : Pass<"mtc-gpu-host-imports", "::mlir::ModuleOp"> {
  let summary = "Call the device-memory variants of the runtime's imports";
  let description = [{
    After mtc-workspace-views on the host functions of a CUDA step: the workspace and the
    GEMM are called through their device-memory variants (runtime/exec/KernelABI.h):
    `mtc_kernel_workspace` becomes `mtc_gpu_workspace`, `mtc_kernel_workspace_release`
    becomes `mtc_gpu_workspace_release`, `mtc_batch_matmul_f32` becomes
    `mtc_gpu_batch_matmul_f32` and `mtc_batch_matmul_bf16` becomes
    `mtc_gpu_batch_matmul_bf16` (declarations and calls). A `memref.alloc` left unplaced is
    an error: the host object has no device allocator besides the workspace.
  }];
}

def GPUHostScratchToStackPass : Pass<"mtc-gpu-host-scratch-to-stack", "::mlir::ModuleOp"> {
  let summary = "Keep the buffers the host code reads and writes itself on the stack";
  let description = [{
    On a CUDA step's host code after buffer-deallocation-pipeline: every `memref.alloc`
    of the host code is device memory (the workspace), except the scratch arrays that
    lower-deallocations makes for a `bufferization.dealloc` whose buffers may alias (the
    base addresses and ownership flags of a buffer a layer loop carries, which its
    `dealloc_helper` compares on the host). Those the host would load and store in device
    memory; here each allocation a `memref.load` or `memref.store` accesses (through
    `memref.cast`s and the arguments of the module's functions it is passed to) becomes a
    `memref.alloca` at the start of its function (once, not per loop iteration) and its
    frees go. They are a few words each.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // MTC_COMPILER_CODEGEN_GPU_PASSES_TD
