// RUN: mt-opt %s --mtc-approximate-math --split-input-file | FileCheck %s

// Tests that f32 exp, tanh and log become arithmetic with no libm call left.
// CHECK-LABEL: func.func @f32_functions
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.log
// CHECK: math.fma
// CHECK: return
func.func @f32_functions(%x: f32) -> (f32, f32, f32) {
  %e = math.exp %x : f32
  %t = math.tanh %x : f32
  %l = math.log %x : f32
  return %e, %t, %l : f32, f32, f32
}

// -----

// Tests that the approximation applies inside a kernel body and to vectors.
// CHECK-LABEL: func.func @in_kernel
// CHECK: linalg.generic
// CHECK-NOT: math.expm1
// CHECK: linalg.yield
// CHECK-NOT: math.erf
// CHECK: return
#id = affine_map<(d0) -> (d0)>
func.func @in_kernel(%x: tensor<8xf32>, %v: vector<8xf32>) -> (tensor<8xf32>, vector<8xf32>) {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%x : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.expm1 %in : f32
    linalg.yield %y : f32
  } -> tensor<8xf32>
  %w = math.erf %v : vector<8xf32>
  return %0, %w : tensor<8xf32>, vector<8xf32>
}

// -----

// Tests that f64 functions and sin/cos (whose approximation reduces rope's large angles
// coarsely) keep their libm calls.
// CHECK-LABEL: func.func @kept
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.tanh %{{.*}} : f64
// CHECK: math.sin %{{.*}} : f32
// CHECK: math.cos %{{.*}} : f32
func.func @kept(%d: f64, %x: f32) -> (f64, f64, f32, f32) {
  %e = math.exp %d : f64
  %t = math.tanh %d : f64
  %s = math.sin %x : f32
  %c = math.cos %x : f32
  return %e, %t, %s, %c : f64, f64, f32, f32
}
