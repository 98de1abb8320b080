// RUN: mt-opt %s -split-input-file -mtc-gpu-host-deallocation-pipeline | FileCheck %s

// Tests that a CUDA step's host code (mtc-gpu-launches-to-calls' output) frees each
// temporary right after the last launch or GEMM that reads it, before the next temporary
// is allocated, with plain frees (no ownership checks, no helper of loads and stores).
// CHECK-LABEL: func.func @step
// CHECK: %[[T1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x2xf32>
// CHECK: call @mtc_gpu_launch(
// CHECK: %[[T2:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x2xf32>
// CHECK: call @mtc_gpu_launch(
// CHECK-NEXT: memref.dealloc %[[T1]]
// CHECK-NEXT: call @mtc_batch_matmul_f32(%[[A:.*]], %[[T2]], %[[B:.*]])
// CHECK-NEXT: memref.dealloc %[[T2]]
// CHECK-NEXT: return
// CHECK-NOT: bufferization.dealloc
// CHECK-NOT: dealloc_helper
llvm.mlir.global internal constant @mtc_kernel_name_step_kernel_0("step_kernel_0\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @mtc_kernel_name_step_kernel_1("step_kernel_1\00") {addr_space = 0 : i32}
func.func private @mtc_gpu_launch(!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64)
func.func private @mtc_batch_matmul_f32(memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>) attributes {llvm.emit_c_interface}
func.func @step(%a: memref<1x2x2xf32>, %b: memref<1x2x2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i64
  %two = arith.constant 2 : i64
  %four = arith.constant 4 : i64
  %words0 = memref.alloca() : memref<1xi64>
  %words1 = memref.alloca() : memref<2xi64>
  // Kernel 0 writes t1.
  %t1 = memref.alloc() {alignment = 64 : i64} : memref<1x2x2xf32>
  %name0 = llvm.mlir.addressof @mtc_kernel_name_step_kernel_0 : !llvm.ptr
  %address0 = memref.extract_aligned_pointer_as_index %t1 : memref<1x2x2xf32> -> index
  %word0 = arith.index_castui %address0 : index to i64
  memref.store %word0, %words0[%c0] : memref<1xi64>
  %base0 = memref.extract_aligned_pointer_as_index %words0 : memref<1xi64> -> index
  %base0_64 = arith.index_castui %base0 : index to i64
  %pointer0 = llvm.inttoptr %base0_64 : i64 to !llvm.ptr
  func.call @mtc_gpu_launch(%name0, %one, %one, %one, %four, %one, %one, %pointer0, %one) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64) -> ()
  // Kernel 1 reads t1 and writes t2.
  %t2 = memref.alloc() {alignment = 64 : i64} : memref<1x2x2xf32>
  %name1 = llvm.mlir.addressof @mtc_kernel_name_step_kernel_1 : !llvm.ptr
  %address1 = memref.extract_aligned_pointer_as_index %t1 : memref<1x2x2xf32> -> index
  %word1 = arith.index_castui %address1 : index to i64
  memref.store %word1, %words1[%c0] : memref<2xi64>
  %address2 = memref.extract_aligned_pointer_as_index %t2 : memref<1x2x2xf32> -> index
  %word2 = arith.index_castui %address2 : index to i64
  memref.store %word2, %words1[%c1] : memref<2xi64>
  %base1 = memref.extract_aligned_pointer_as_index %words1 : memref<2xi64> -> index
  %base1_64 = arith.index_castui %base1 : index to i64
  %pointer1 = llvm.inttoptr %base1_64 : i64 to !llvm.ptr
  func.call @mtc_gpu_launch(%name1, %one, %one, %one, %four, %one, %one, %pointer1, %two) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64) -> ()
  // The GEMM reads t2.
  func.call @mtc_batch_matmul_f32(%a, %t2, %b) : (memref<1x2x2xf32>, memref<1x2x2xf32>, memref<1x2x2xf32>) -> ()
  return
}

// -----

// Tests that a temporary of one iteration of a layer loop is freed in that iteration, not
// held until the loop ends: the workspace planner then places it once for every layer.
// CHECK-LABEL: func.func @layers
// CHECK: scf.for
// CHECK: %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK: call @layer(%{{.*}}, %[[T]])
// CHECK-NEXT: call @layer(%[[T]], %{{.*}})
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NEXT: }
// CHECK-NOT: bufferization.dealloc
func.func private @layer(memref<4xf32>, memref<4xf32>)
func.func @layers(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c12 = arith.constant 12 : index
  scf.for %i = %c0 to %c12 step %c1 {
    %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    func.call @layer(%x, %t) : (memref<4xf32>, memref<4xf32>) -> ()
    func.call @layer(%t, %x) : (memref<4xf32>, memref<4xf32>) -> ()
  }
  return
}

// -----

// Tests that the buffer a layer loop carries, which may alias the one it started from, is
// freed by the lowered deallocation's helper, whose arrays of addresses and flags the host
// writes and reads: they are stack arrays, never allocations the workspace planner would
// place in device memory.
// CHECK-LABEL: func.func @carried
// CHECK-DAG: %[[ADDRESSES:.*]] = memref.alloca() : memref<2xindex>
// CHECK-DAG: %[[FLAGS:.*]] = memref.alloca() : memref<2xi1>
// CHECK-NOT: memref.alloc() : memref<{{[0-9]+}}x{{(index|i1)}}>
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[ADDRESSES]]
// CHECK: call @dealloc_helper(
// CHECK: memref.load %[[FLAGS]]
// CHECK-NOT: memref.alloc() : memref<{{[0-9]+}}x{{(index|i1)}}>
// CHECK: return
func.func private @layer(memref<4xf32>, memref<4xf32>)
func.func @carried(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %init = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  func.call @layer(%x, %init) : (memref<4xf32>, memref<4xf32>) -> ()
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%h = %init) -> memref<4xf32> {
    %n = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    func.call @layer(%h, %n) : (memref<4xf32>, memref<4xf32>) -> ()
    scf.yield %n : memref<4xf32>
  }
  func.call @layer(%r, %x) : (memref<4xf32>, memref<4xf32>) -> ()
  return
}
