// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-thread-kernel-context | FileCheck %s

// Tests that every function with a body and every runtime import takes the context first,
// that calls pass the caller's context, and that other declarations are left alone.
// CHECK-LABEL: func.func private @mtc_all_reduce(!llvm.ptr {mtc.kernel_context}, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func private @mtc_dropout_keep_element(i64, i32, i64, i32, f32) -> i32
// CHECK-LABEL: func.func private @layer
// CHECK-SAME: (%[[LCTX:.*]]: !llvm.ptr {mtc.kernel_context}, %[[X:.*]]: i64)
// CHECK: call @mtc_all_reduce(%[[LCTX]], %[[X]],
// CHECK: call @mtc_dropout_keep_element(%[[X]],
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr {mtc.kernel_context}, %[[Y:.*]]: i64)
// CHECK: scf.for
// CHECK: call @layer(%[[CTX]], %[[Y]])
func.func private @mtc_all_reduce(i64, i64, i64, i64, i64, i64)
func.func private @mtc_dropout_keep_element(i64, i32, i64, i32, f32) -> i32
func.func private @layer(%x: i64) {
  func.call @mtc_all_reduce(%x, %x, %x, %x, %x, %x) : (i64, i64, i64, i64, i64, i64) -> ()
  %i = arith.trunci %x : i64 to i32
  %p = arith.constant 0.5 : f32
  %k = func.call @mtc_dropout_keep_element(%x, %i, %x, %i, %p) : (i64, i32, i64, i32, f32) -> i32
  return
}
func.func @step(%y: i64) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c2 step %c1 {
    func.call @layer(%y) : (i64) -> ()
  }
  return
}

// -----

// Tests that the GEMM import gets the context in front of its descriptors.
// CHECK-LABEL: func.func private @mtc_batch_matmul_f32(!llvm.ptr {mtc.kernel_context}, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK-LABEL: func.func @product
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr {mtc.kernel_context}, %[[A:.*]]: memref
// CHECK: call @mtc_batch_matmul_f32(%[[CTX]], %[[A]], %[[A]], %[[A]])
func.func private @mtc_batch_matmul_f32(memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
func.func @product(%a: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  func.call @mtc_batch_matmul_f32(%a, %a, %a) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

// Tests that a function whose address is taken cannot be threaded.
func.func private @callee() {
  return
}
func.func @take() {
  // expected-error @+1 {{the kernel context cannot be passed through this use of 'callee' (only calls are supported)}}
  %f = func.constant @callee : () -> ()
  return
}

// -----

// Tests that a reference in another function's attributes (a layer's outlined forward
// names its layer) is not a use that needs the context.
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%{{.*}}: !llvm.ptr {mtc.kernel_context}, %{{.*}}: i64)
// CHECK-LABEL: func.func @block.fwd
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr {mtc.kernel_context}, %[[X:.*]]: i64)
// CHECK-SAME: attributes {mt.layer_of = @block}
// CHECK: call @block(%[[CTX]], %[[X]])
func.func private @block(%x: i64) {
  return
}
func.func @block.fwd(%x: i64) attributes {mt.layer_of = @block} {
  func.call @block(%x) : (i64) -> ()
  return
}
