// RUN: mt-opt %s -split-input-file -mtc-erase-mt-declarations | FileCheck %s

// Tests that the mt declarations at module level (parameters) are erased and that the
// functions, whose bodies hold no mt op anymore, are kept.
// CHECK-LABEL: module
// CHECK-NOT: mt.param
// CHECK: func.func @step
// CHECK-NOT: mt.param
module attributes {mt.dims = {hidden = 4 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4], f32> init zeros
  func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  mt.param @b : !mt.tensor<[hidden=4], f32> init ones
}

// -----

// Tests that the optimizer state goes with the parameters it belongs to.
// CHECK-LABEL: module
// CHECK-NOT: mt.param
// CHECK-NOT: mt.state
// CHECK: func.func @optimizer_step
// CHECK-NOT: mt.param
// CHECK-NOT: mt.state
module attributes {mt.dims = {hidden = 8 : i64}} {
  mt.param @w : !mt.tensor<[hidden=8], f32> init zeros
  mt.state @w.m of @w : !mt.tensor<[hidden=8], f32>
  func.func @optimizer_step() {
    return
  }
}
