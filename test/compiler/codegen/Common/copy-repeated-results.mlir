// RUN: mt-opt %s -split-input-file -mtc-copy-repeated-results | FileCheck %s

// Tests that a tensor returned twice keeps its first position and is copied into a fresh
// tensor for the second.
// CHECK-LABEL: func.func @twice
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK: %[[C:.*]] = linalg.copy ins(%[[X]] : tensor<2x4xf32>) outs(%[[E]] : tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: return %[[X]], %[[C]] : tensor<2x4xf32>, tensor<2x4xf32>
func.func @twice(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  return %x, %x : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that each further repetition gets its own copy and that distinct values and
// scalars are left alone.
// CHECK-LABEL: func.func @three_times
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>, %[[Y:.*]]: tensor<3xf32>, %[[S:.*]]: f32)
// CHECK: %[[C1:.*]] = linalg.copy ins(%[[X]] : tensor<3xf32>)
// CHECK: %[[C2:.*]] = linalg.copy ins(%[[X]] : tensor<3xf32>)
// CHECK: return %[[X]], %[[Y]], %[[C1]], %[[S]], %[[S]], %[[C2]] :
func.func @three_times(%x: tensor<3xf32>, %y: tensor<3xf32>, %s: f32)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, f32, f32, tensor<3xf32>) {
  return %x, %y, %x, %s, %s, %x : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, f32, f32, tensor<3xf32>
}

// -----

// Tests that a function returning each value once is unchanged.
// CHECK-LABEL: func.func @once
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @once(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  return %y, %x : tensor<3xf32>, tensor<3xf32>
}
