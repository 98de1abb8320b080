// Tests that mt-opt knows the upstream dialects and clean-up passes the pipelines use:
// the output of mt-to-linalg parses back in and canonicalizes.
// RUN: mt-opt %s -mt-to-linalg | mt-opt -canonicalize -cse | FileCheck %s

// CHECK-LABEL: func.func @scale
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: linalg.generic
// CHECK: arith.mulf
func.func @scale(%x: !mt.tensor<[batch=2, hidden=4], f32>) -> !mt.tensor<[batch=2, hidden=4], f32> {
  %c = mt.constant 2.000000e+00 : !mt.tensor<[], f32>
  %y = mt.mul %x, %c : !mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[batch=2, hidden=4], f32>
  return %y : !mt.tensor<[batch=2, hidden=4], f32>
}
