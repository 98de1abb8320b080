// RUN: mt-opt %s -mtc-to-linalg-pipeline -mtc-cpu-pipeline | FileCheck %s
// RUN: mt-opt %s -mtc-to-linalg-pipeline -mtc-cpu-bufferize-pipeline -mtc-cpu-to-llvm-pipeline > %t.halves.mlir
// RUN: mt-opt %s -mtc-to-linalg-pipeline -mtc-cpu-pipeline > %t.whole.mlir
// RUN: diff %t.halves.mlir %t.whole.mlir
// RUN: mt-opt %s -mtc-to-linalg-pipeline -mtc-cpu-pipeline --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=STEPS

// Tests that the CPU backend takes linalg on tensors to the LLVM dialect alone (the
// exported C interface calls the runtime's GEMM), that every function takes the kernel
// context first and passes it to the runtime (GEMM, workspace), that the temporaries are
// blocks of the workspace (no allocation left) whose accesses LLVM is told are apart from
// the arguments', that it is its two halves one after the other, and that every step of it
// is a pass --mlir-print-ir-after-all shows, in order.
// CHECK-NOT: memref.
// CHECK-NOT: linalg.
// CHECK-NOT: @malloc
// CHECK-NOT: @mtc_kernel_alloc
// CHECK-DAG: llvm.func @mtc_kernel_workspace(!llvm.ptr {mtc.kernel_context}, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @mtc_kernel_workspace_release(!llvm.ptr {mtc.kernel_context}, !llvm.ptr)
// CHECK-LABEL: llvm.func private @mtc_batch_matmul_f32(
// CHECK-SAME: %[[GCTX:[^:]*]]: !llvm.ptr {mtc.kernel_context},
// CHECK: llvm.call @_mlir_ciface_mtc_batch_matmul_f32(%[[GCTX]],
// CHECK-LABEL: llvm.func @step(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr {mtc.kernel_context},
// CHECK: %[[WS:.*]] = llvm.call @mtc_kernel_workspace(%[[CTX]],
// CHECK: llvm.store {{.*}} {alias_scopes = [#[[BLOCK:.*]]], noalias_scopes = [#[[ARGS:.*]]]}
// CHECK: llvm.call @mtc_batch_matmul_f32(%[[CTX]],
// CHECK: llvm.store {{.*}} {alias_scopes = [#[[ARGS]]], noalias_scopes = [#[[BLOCK]]]}
// CHECK: llvm.call @mtc_kernel_workspace_release(%[[CTX]], %[[WS]])
// CHECK-LABEL: llvm.func @_mlir_ciface_step(
// CHECK-SAME: %[[CCTX:[^:]*]]: !llvm.ptr {mtc.kernel_context},
// CHECK: llvm.call @step(%[[CCTX]],
// CHECK-NOT: @free
// CHECK-NOT: memref.
// CHECK-NOT: linalg.

// STEPS: IR Dump After EraseMTDeclarationsPass (mtc-erase-mt-declarations)
// STEPS: IR Dump After RequestCInterfacesPass (mtc-request-c-interfaces)
// STEPS: IR Dump After CopyRepeatedResultsPass (mtc-copy-repeated-results)
// STEPS: IR Dump After FuseElementwisePass (mtc-fuse-elementwise)
// STEPS: IR Dump After Canonicalizer (canonicalize)
// STEPS: IR Dump After OneShotBufferizePass (one-shot-bufferize)
// STEPS: IR Dump After BufferResultsToOutParamsPass (buffer-results-to-out-params)
// STEPS: IR Dump After Canonicalizer (canonicalize)
// STEPS: IR Dump After GemmOperandViewsPass (mtc-gemm-operand-views)
// STEPS: IR Dump After ExpandStridedCopiesPass (mtc-expand-strided-copies)
// STEPS: IR Dump After BatchMatmulToCallsPass (mtc-batch-matmul-to-calls)
// STEPS: IR Dump After OwnershipBasedBufferDeallocationPass (ownership-based-buffer-deallocation)
// STEPS: IR Dump After EarlyDeallocationPass (mtc-early-deallocation)
// STEPS: IR Dump After WorkspaceViewsPass (mtc-workspace-views)
// STEPS: IR Dump After ThreadKernelContextPass (mtc-thread-kernel-context)
// STEPS: IR Dump After ReductionLoopOrderPass (mtc-reduction-loop-order)
// STEPS: IR Dump After ConvertLinalgToParallelLoopsPass (convert-linalg-to-parallel-loops)
// STEPS: IR Dump After SelectParallelLoopsPass (mtc-select-parallel-loops)
// STEPS: IR Dump After ConvertSCFToOpenMPPass (convert-scf-to-openmp)
// STEPS: IR Dump After Canonicalizer (canonicalize)
// STEPS: IR Dump After ApproximateMathPass (mtc-approximate-math)
// STEPS: IR Dump After FinalizeMemRefToLLVMConversionPass (finalize-memref-to-llvm)
// STEPS: IR Dump After WorkspaceAliasScopesPass (mtc-workspace-alias-scopes)
// STEPS: IR Dump After RedirectAllocationsPass (mtc-redirect-allocations)
// STEPS: IR Dump After ConvertOpenMPToLLVMPass (convert-openmp-to-llvm)
// STEPS: IR Dump After ConvertFuncToLLVMPass (convert-func-to-llvm)
// STEPS: IR Dump After ReconcileUnrealizedCastsPass (reconcile-unrealized-casts)
module attributes {mt.dims = {batch = 2 : i64, hidden = 4 : i64, ffn = 8 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4, ffn=8], f32> init zeros
  func.func @step(%x: !mt.tensor<[batch=2, hidden=4], f32>, %w: !mt.tensor<[hidden=4, ffn=8], f32>) -> !mt.tensor<[batch=2, ffn=8], f32> {
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[hidden=4, ffn=8], f32> -> !mt.tensor<[batch=2, ffn=8], f32>
    %y = mt.tanh %h : !mt.tensor<[batch=2, ffn=8], f32>
    return %y : !mt.tensor<[batch=2, ffn=8], f32>
  }
}
