// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-drop-in-place-results | FileCheck %s

// Tests that the results returning the argument of the same parameter or state are erased
// and the others (the norm, the learning rate) kept in order.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: -> (memref<f32> {mt.buffer = "grad_norm"}, memref<f32> {mt.buffer = "lr"})
// CHECK: return %{{.*}}, %{{.*}} : memref<f32>, memref<f32>
func.func @optimizer_step(%w: memref<4xf32> {mt.param = @w}, %m: memref<4xf32> {mt.state = @w.m},
                          %norm: memref<f32>, %lr: memref<f32>)
    -> (memref<f32> {mt.buffer = "grad_norm"}, memref<4xf32> {mt.param = @w},
        memref<f32> {mt.buffer = "lr"}, memref<4xf32> {mt.state = @w.m}) {
  return %norm, %w, %lr, %m : memref<f32>, memref<4xf32>, memref<f32>, memref<4xf32>
}

// -----

// Tests that a new parameter value in another buffer than its argument's is an error (the
// plan lists no output for it).
// expected-error @below {{returns the new value of argument 0 in another buffer (run mtc-update-in-place before bufferizing)}}
func.func @other_buffer(%w: memref<4xf32> {mt.param = @w}, %other: memref<4xf32>)
    -> (memref<4xf32> {mt.param = @w}) {
  return %other : memref<4xf32>
}

// -----

// Tests that another parameter's argument returned as the new value of @v is an error too.
// expected-error @below {{returns the new value of argument 1 in another buffer}}
func.func @renamed(%w: memref<4xf32> {mt.param = @w}, %v: memref<4xf32> {mt.param = @v})
    -> (memref<4xf32> {mt.param = @v}) {
  return %w : memref<4xf32>
}
