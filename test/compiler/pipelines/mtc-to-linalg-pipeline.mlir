// RUN: mt-opt %s -split-input-file -mtc-to-linalg-pipeline | FileCheck %s

// Tests that the stage from per-rank mt functions to linalg rewrites the functions onto
// builtin tensors and linalg (mt-to-linalg) and leaves module-level declarations alone.
// CHECK: mt.param @w
// CHECK-LABEL: func.func @scale
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: linalg.generic
// CHECK: arith.mulf
// CHECK-NOT: mt.
module attributes {mt.dims = {batch = 2 : i64, hidden = 4 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4], f32> init ones
  func.func @scale(%x: !mt.tensor<[batch=2, hidden=4], f32>, %w: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[batch=2, hidden=4], f32> {
    %y = mt.mul %x, %w : !mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[hidden=4], f32> -> !mt.tensor<[batch=2, hidden=4], f32>
    return %y : !mt.tensor<[batch=2, hidden=4], f32>
  }
}
