// RUN: mt-opt %s -mtc-gpu-host-to-llvm-pipeline | FileCheck %s

// Tests that a CUDA step's host code (mtc-gpu-launches-to-calls' output) becomes LLVM with
// the x86 object's C interface: the context first in every function and runtime call, the
// temporary placed in the workspace reached through mtc_gpu_workspace (released before the
// return), the launch through mtc_gpu_launch, and the GEMM through the device-memory variant.
// CHECK-DAG: llvm.func @mtc_gpu_launch(!llvm.ptr {mtc.kernel_context}, !llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64)
// CHECK-DAG: llvm.func @mtc_gpu_workspace(!llvm.ptr {mtc.kernel_context}, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @mtc_gpu_workspace_release(!llvm.ptr {mtc.kernel_context}, !llvm.ptr)
// CHECK-DAG: llvm.func @_mlir_ciface_mtc_gpu_batch_matmul_f32(
// CHECK-LABEL: llvm.func @step(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr {mtc.kernel_context}
// CHECK: %[[W:.*]] = llvm.call @mtc_gpu_workspace(%[[CTX]],
// CHECK: llvm.call @mtc_gpu_launch(%[[CTX]],
// CHECK: llvm.call @mtc_gpu_batch_matmul_f32(%[[CTX]],
// CHECK: llvm.call @mtc_gpu_workspace_release(%[[CTX]], %[[W]])
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @_mlir_ciface_step(
// CHECK-NOT: mtc_kernel_workspace
// CHECK-NOT: llvm.call @malloc
llvm.mlir.global internal constant @mtc_kernel_name_step_kernel_0("step_kernel_0\00") {addr_space = 0 : i32}
func.func private @mtc_gpu_launch(!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64)
func.func private @mtc_batch_matmul_f32(memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>) attributes {llvm.emit_c_interface}
func.func @step(%a: memref<1x2x2xf32>, %b: memref<1x2x2xf32>) {
  %words = memref.alloca() : memref<1xi64>
  %t = memref.alloc() {alignment = 64 : i64} : memref<1x2x2xf32>
  %name = llvm.mlir.addressof @mtc_kernel_name_step_kernel_0 : !llvm.ptr
  %c0 = arith.constant 0 : index
  %address = memref.extract_aligned_pointer_as_index %t : memref<1x2x2xf32> -> index
  %word = arith.index_castui %address : index to i64
  memref.store %word, %words[%c0] : memref<1xi64>
  %base = memref.extract_aligned_pointer_as_index %words : memref<1xi64> -> index
  %base64 = arith.index_castui %base : index to i64
  %pointer = llvm.inttoptr %base64 : i64 to !llvm.ptr
  %one = arith.constant 1 : i64
  %four = arith.constant 4 : i64
  func.call @mtc_gpu_launch(%name, %one, %one, %one, %four, %one, %one, %pointer, %one) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64) -> ()
  func.call @mtc_batch_matmul_f32(%a, %t, %b) : (memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>) -> ()
  return
}
