// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-gpu-host-imports | FileCheck %s

// Tests that the workspace and the GEMM are renamed to their device-memory variants, in
// their declarations and their calls.
// CHECK-LABEL: func.func private @mtc_gpu_workspace(i64) -> !llvm.ptr
// CHECK-LABEL: func.func private @mtc_gpu_workspace_release(!llvm.ptr)
// CHECK-LABEL: func.func private @mtc_gpu_batch_matmul_f32(memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>)
// CHECK-SAME: llvm.emit_c_interface
// CHECK-LABEL: func.func @step
// CHECK: %[[W:.*]] = call @mtc_gpu_workspace(
// CHECK: call @mtc_gpu_batch_matmul_f32(
// CHECK: call @mtc_gpu_workspace_release(%[[W]])
func.func private @mtc_kernel_workspace(i64) -> !llvm.ptr
func.func private @mtc_kernel_workspace_release(!llvm.ptr)
func.func private @mtc_batch_matmul_f32(memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>) attributes {llvm.emit_c_interface}
func.func @step(%a: memref<1x2x2xf32>, %b: memref<1x2x2xf32>, %c: memref<1x2x2xf32>) {
  %bytes = arith.constant 64 : i64
  %w = func.call @mtc_kernel_workspace(%bytes) : (i64) -> !llvm.ptr
  func.call @mtc_batch_matmul_f32(%a, %b, %c) : (memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>) -> ()
  func.call @mtc_kernel_workspace_release(%w) : (!llvm.ptr) -> ()
  return
}

// -----

// Tests that the bf16 GEMM (bf16 operands into an f32 result) is renamed too.
// CHECK-LABEL: func.func private @mtc_gpu_batch_matmul_bf16(memref<1x2x2xbf16>, memref<1x2x2xbf16>, memref<1x2x2xf32>)
// CHECK-SAME: llvm.emit_c_interface
// CHECK-LABEL: func.func @bf16_step
// CHECK: call @mtc_gpu_batch_matmul_bf16(
// CHECK-NOT: mtc_batch_matmul_bf16
func.func private @mtc_batch_matmul_bf16(memref<1x2x2xbf16>, memref<1x2x2xbf16>, memref<1x2x2xf32>) attributes {llvm.emit_c_interface}
func.func @bf16_step(%a: memref<1x2x2xbf16>, %b: memref<1x2x2xbf16>, %c: memref<1x2x2xf32>) {
  func.call @mtc_batch_matmul_bf16(%a, %b, %c) : (memref<1x2x2xbf16>, memref<1x2x2xbf16>, memref<1x2x2xf32>) -> ()
  return
}

// -----

// Tests that a temporary left unplaced is an error: the host code cannot allocate it.
func.func @unplaced(%n: index) {
  // expected-error @+1 {{is a temporary the workspace planner could not place}}
  %t = memref.alloc(%n) : memref<?xf32>
  return
}
