// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-redirect-allocations | FileCheck %s

// Tests that malloc and free become the runtime's functions with the caller's context in
// front, and that the C declarations go.
// CHECK-NOT: @malloc
// CHECK-NOT: @free
// CHECK-DAG: llvm.func @mtc_kernel_alloc(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @mtc_kernel_free(!llvm.ptr, !llvm.ptr)
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr {mtc.kernel_context}, %[[N:.*]]: i64)
// CHECK: %[[P:.*]] = llvm.call @mtc_kernel_alloc(%[[CTX]], %[[N]]) : (!llvm.ptr, i64) -> !llvm.ptr
// CHECK: llvm.store %{{.*}}, %[[P]]
// CHECK: llvm.call @mtc_kernel_free(%[[CTX]], %[[P]]) : (!llvm.ptr, !llvm.ptr) -> ()
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @free(!llvm.ptr)
func.func @step(%ctx: !llvm.ptr {mtc.kernel_context}, %n: i64) {
  %p = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
  %zero = llvm.mlir.constant(0.0 : f32) : f32
  llvm.store %zero, %p : f32, !llvm.ptr
  llvm.call @free(%p) : (!llvm.ptr) -> ()
  return
}

// -----

// Tests that calloc and aligned_alloc keep their arguments after the context, and that a
// function of the module (here an llvm.func) passes its own context.
// CHECK-LABEL: llvm.func @zeroed
// CHECK-SAME: (%[[CTX:.*]]: !llvm.ptr {mtc.kernel_context}, %[[N:.*]]: i64)
// CHECK: llvm.call @mtc_kernel_calloc(%[[CTX]], %[[N]], %[[N]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
// CHECK: llvm.call @mtc_kernel_aligned_alloc(%[[CTX]], %[[N]], %[[N]]) : (!llvm.ptr, i64, i64) -> !llvm.ptr
llvm.func @calloc(i64, i64) -> !llvm.ptr
llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
llvm.func @zeroed(%ctx: !llvm.ptr {mtc.kernel_context}, %n: i64) {
  %p = llvm.call @calloc(%n, %n) : (i64, i64) -> !llvm.ptr
  %q = llvm.call @aligned_alloc(%n, %n) : (i64, i64) -> !llvm.ptr
  llvm.return
}

// -----

// Tests that an allocation in a function without a kernel context is an error.
llvm.func @malloc(i64) -> !llvm.ptr
func.func @orphan(%n: i64) {
  // expected-error @+1 {{this malloc has no kernel context to pass to the runtime (its function takes none: run mtc-thread-kernel-context first)}}
  %p = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
  return
}

// -----

// Tests that an allocation function the runtime does not provide is an error.
llvm.func @realloc(!llvm.ptr, i64) -> !llvm.ptr
func.func @grow(%ctx: !llvm.ptr {mtc.kernel_context}, %p: !llvm.ptr, %n: i64) {
  // expected-error @+1 {{the kernels call realloc, which the runtime's allocator does not provide}}
  %q = llvm.call @realloc(%p, %n) : (!llvm.ptr, i64) -> !llvm.ptr
  return
}

// -----

// Tests that a symbol taking the name of a runtime allocation function with another type
// is an error.
llvm.func @malloc(i64) -> !llvm.ptr
// expected-error @+1 {{'mtc_kernel_alloc' is the runtime's allocation function and must be an llvm.func of type '!llvm.func<ptr (ptr, i64)>'}}
llvm.func @mtc_kernel_alloc(i64) -> !llvm.ptr
func.func @clash(%ctx: !llvm.ptr {mtc.kernel_context}, %n: i64) {
  %p = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
  return
}

// -----

// Tests that a second allocation reuses the runtime function's declaration.
// CHECK-LABEL: llvm.func @mtc_kernel_alloc(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-NOT: llvm.func @mtc_kernel_alloc
// CHECK-LABEL: func.func @twice
// CHECK-COUNT-2: llvm.call @mtc_kernel_alloc(
llvm.func @malloc(i64) -> !llvm.ptr
func.func @twice(%ctx: !llvm.ptr {mtc.kernel_context}, %n: i64) {
  %p = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
  %q = llvm.call @malloc(%n) : (i64) -> !llvm.ptr
  return
}
