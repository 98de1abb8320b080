// RUN: mt-opt %s -split-input-file -mtc-gpu-host-scratch-to-stack | FileCheck %s

// Tests that the scratch arrays of a lowered deallocation, which the host code stores into
// and loads from (directly or in the helper it passes them to), become stack arrays at the
// function's entry, their frees gone, while a temporary only passed to a launch and to the
// GEMM (device memory) stays an allocation with its free.
// CHECK-LABEL: func.func @step
// CHECK-DAG: %[[ADDRESSES:.*]] = memref.alloca() : memref<2xindex>
// CHECK-DAG: %[[RETAINED:.*]] = memref.alloca() : memref<0xindex>
// CHECK-DAG: %[[FLAGS:.*]] = memref.alloca() : memref<2xi1>
// CHECK: scf.for
// CHECK: %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK: call @mtc_batch_matmul_f32(%[[T]])
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK: memref.store %{{.*}}, %[[ADDRESSES]]
// CHECK: %[[CAST:.*]] = memref.cast %[[RETAINED]]
// CHECK: call @dealloc_helper(%{{.*}}, %[[CAST]], %{{.*}})
// CHECK: memref.load %[[FLAGS]]
// CHECK-NOT: memref.dealloc %[[ADDRESSES]]
// CHECK-NOT: memref.dealloc %[[RETAINED]]
// CHECK-NOT: memref.dealloc %[[FLAGS]]
// CHECK: return
func.func private @mtc_batch_matmul_f32(memref<4xf32>)
func.func private @dealloc_helper(%addresses: memref<?xindex>, %retained: memref<?xindex>, %flags: memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %a = memref.load %addresses[%c0] : memref<?xindex>
  %r = memref.load %retained[%c0] : memref<?xindex>
  %f = arith.constant true
  memref.store %f, %flags[%c0] : memref<?xi1>
  return
}
func.func @step(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    func.call @mtc_batch_matmul_f32(%t) : (memref<4xf32>) -> ()
    memref.dealloc %t : memref<4xf32>
  }
  %addresses = memref.alloc() : memref<2xindex>
  %retained = memref.alloc() : memref<0xindex>
  %p = memref.extract_aligned_pointer_as_index %x : memref<4xf32> -> index
  memref.store %p, %addresses[%c0] : memref<2xindex>
  %cast_addresses = memref.cast %addresses : memref<2xindex> to memref<?xindex>
  %cast_retained = memref.cast %retained : memref<0xindex> to memref<?xindex>
  %flags = memref.alloc() : memref<2xi1>
  %cast_flags = memref.cast %flags : memref<2xi1> to memref<?xi1>
  func.call @dealloc_helper(%cast_addresses, %cast_retained, %cast_flags) : (memref<?xindex>, memref<?xindex>, memref<?xi1>) -> ()
  memref.dealloc %retained : memref<0xindex>
  memref.dealloc %addresses : memref<2xindex>
  %owned = memref.load %flags[%c0] : memref<2xi1>
  memref.dealloc %flags : memref<2xi1>
  return
}
