// RUN: mt-opt %s -split-input-file -mt-to-linalg | FileCheck %s
// RUN: mtc-codegen %s --target=x86 -o %t.so
// RUN: llvm-nm -D %t.so | FileCheck %s --check-prefix=SO

// Tests that f32 contractions become linalg.batch_matmul on [batch, rows, contracted] x
// [batch, contracted, columns] operands (transposed only where their order differs, then
// reshaped to rank 3 with unit dimensions for empty groups) into a zero fill, and that the
// product is reshaped and transposed back into the result's order; bf16 and f16 products
// read the low type into an f32 product that is rounded once at the end; other element
// types keep one generic op. The x86 object imports the GEMM from the process that loads it.

// SO: U _mlir_ciface_mtc_batch_matmul_f32

// A plain matrix product: no transposes, a unit batch dimension.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: linalg.transpose
// CHECK: %[[A:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
// CHECK: %[[B:.*]] = tensor.expand_shape %[[W]] {{\[}}[0, 1], [2]] output_shape [1, 8, 16] : tensor<8x16xf32> into tensor<1x8x16xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x4x16xf32>)
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<1x4x8xf32>, tensor<1x8x16xf32>) outs(%[[INIT]] : tensor<1x4x16xf32>)
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[P]] {{\[}}[0, 1], [2]] : tensor<1x4x16xf32> into tensor<4x16xf32>
// CHECK-NOT: linalg.transpose
// CHECK: return %[[R]]
func.func @matmul(%x: !mt.tensor<[seq=4, hidden=8], f32>, %w: !mt.tensor<[hidden=8, ffn=16], f32>)
    -> !mt.tensor<[seq=4, ffn=16], f32> {
  %0 = mt.contract %x, %w over [hidden] : !mt.tensor<[seq=4, hidden=8], f32>,
      !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[seq=4, ffn=16], f32>
  return %0 : !mt.tensor<[seq=4, ffn=16], f32>
}

// -----

// A weight gradient contracts over the lhs's leading dimension: the lhs is transposed to
// [rows, contracted] first.
// CHECK-LABEL: func.func @weight_grad
// CHECK-SAME: (%[[DY:.*]]: tensor<4x16xf32>, %[[X:.*]]: tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[DY]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<16x4xf32>) permutation = [1, 0]
// CHECK: %[[A:.*]] = tensor.expand_shape %[[T]] {{\[}}[0, 1], [2]] output_shape [1, 16, 4]
// CHECK: %[[B:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1], [2]] output_shape [1, 4, 8]
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<1x16x4xf32>, tensor<1x4x8xf32>) outs(%{{.*}} : tensor<1x16x8xf32>)
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[P]] {{\[}}[0, 1], [2]] : tensor<1x16x8xf32> into tensor<16x8xf32>
// CHECK: return %[[R]]
func.func @weight_grad(%dy: !mt.tensor<[seq=4, ffn=16], f32>, %x: !mt.tensor<[seq=4, hidden=8], f32>)
    -> !mt.tensor<[ffn=16, hidden=8], f32> {
  %0 = mt.contract %dy, %x over [seq] : !mt.tensor<[seq=4, ffn=16], f32>,
      !mt.tensor<[seq=4, hidden=8], f32> -> !mt.tensor<[ffn=16, hidden=8], f32>
  return %0 : !mt.tensor<[ffn=16, hidden=8], f32>
}

// -----

// Attention scores: two batch dimensions collapse into one; the keys are transposed to
// [batch, heads, head_dim, kv_seq].
// CHECK-LABEL: func.func @scores
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK: %[[A:.*]] = tensor.collapse_shape %[[Q]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[K]] : tensor<2x4x8x16xf32>) outs(%{{.*}} : tensor<2x4x16x8xf32>) permutation = [0, 1, 3, 2]
// CHECK: %[[B:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<8x8x16xf32>, tensor<8x16x8xf32>) outs(%{{.*}} : tensor<8x8x8xf32>)
// CHECK: %[[R:.*]] = tensor.expand_shape %[[P]] {{\[}}[0, 1], [2], [3]] output_shape [2, 4, 8, 8] : tensor<8x8x8xf32> into tensor<2x4x8x8xf32>
// CHECK: return %[[R]]
func.func @scores(%q: !mt.tensor<[batch=2, heads=4, seq=8, head_dim=16], f32>,
                  %k: !mt.tensor<[batch=2, heads=4, kv_seq=8, head_dim=16], f32>)
    -> !mt.tensor<[batch=2, heads=4, seq=8, kv_seq=8], f32> {
  %0 = mt.contract %q, %k over [head_dim] : !mt.tensor<[batch=2, heads=4, seq=8, head_dim=16], f32>,
      !mt.tensor<[batch=2, heads=4, kv_seq=8, head_dim=16], f32>
      -> !mt.tensor<[batch=2, heads=4, seq=8, kv_seq=8], f32>
  return %0 : !mt.tensor<[batch=2, heads=4, seq=8, kv_seq=8], f32>
}

// -----

// A batch dimension after a row dimension: the lhs is transposed to put it first, the
// product back into the result's [seq, batch]; no columns, so a unit one.
// CHECK-LABEL: func.func @batch_after_rows
// CHECK-SAME: (%[[X:.*]]: tensor<4x2x8xf32>, %[[W:.*]]: tensor<2x8xf32>) -> tensor<4x2xf32>
// CHECK: %[[A:.*]] = linalg.transpose ins(%[[X]] : tensor<4x2x8xf32>) outs(%{{.*}} : tensor<2x4x8xf32>) permutation = [1, 0, 2]
// CHECK: %[[B:.*]] = tensor.expand_shape %[[W]] {{\[}}[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<2x4x8xf32>, tensor<2x8x1xf32>) outs(%{{.*}} : tensor<2x4x1xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[P]] {{\[}}[0], [1, 2]] : tensor<2x4x1xf32> into tensor<2x4xf32>
// CHECK: %[[R:.*]] = linalg.transpose ins(%[[C]] : tensor<2x4xf32>) outs(%{{.*}} : tensor<4x2xf32>) permutation = [1, 0]
// CHECK: return %[[R]]
func.func @batch_after_rows(%x: !mt.tensor<[seq=4, batch=2, hidden=8], f32>,
                            %w: !mt.tensor<[batch=2, hidden=8], f32>)
    -> !mt.tensor<[seq=4, batch=2], f32> {
  %0 = mt.contract %x, %w over [hidden] : !mt.tensor<[seq=4, batch=2, hidden=8], f32>,
      !mt.tensor<[batch=2, hidden=8], f32> -> !mt.tensor<[seq=4, batch=2], f32>
  return %0 : !mt.tensor<[seq=4, batch=2], f32>
}

// -----

// A dot product: every group but the contracted one is a unit dimension.
// CHECK-LABEL: func.func @dot
// CHECK: %[[A:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1, 2]] output_shape [1, 1, 8] : tensor<8xf32> into tensor<1x1x8xf32>
// CHECK: %[[B:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1, 2]] output_shape [1, 8, 1] : tensor<8xf32> into tensor<1x8x1xf32>
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<1x1x8xf32>, tensor<1x8x1xf32>) outs(%{{.*}} : tensor<1x1x1xf32>)
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[P]] [] : tensor<1x1x1xf32> into tensor<f32>
// CHECK: return %[[R]]
func.func @dot(%x: !mt.tensor<[n=8], f32>, %y: !mt.tensor<[n=8], f32>) -> !mt.tensor<[], f32> {
  %0 = mt.contract %x, %y over [n] : !mt.tensor<[n=8], f32>, !mt.tensor<[n=8], f32>
      -> !mt.tensor<[], f32>
  return %0 : !mt.tensor<[], f32>
}

// -----

// The fallback: an f64 contraction (no library call for it) stays one generic op over the
// result's dimensions then the contracted one.
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[$R:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @f64
// CHECK-NOT: linalg.batch_matmul
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f64) outs(%{{.*}} : tensor<4x16xf64>)
// CHECK: linalg.generic {indexing_maps = [#[[$X]], #[[$W]], #[[$R]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: outs(%[[INIT]] : tensor<4x16xf64>)
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @f64(%x: !mt.tensor<[seq=4, hidden=8], f64>, %w: !mt.tensor<[hidden=8, ffn=16], f64>)
    -> !mt.tensor<[seq=4, ffn=16], f64> {
  %0 = mt.contract %x, %w over [hidden] : !mt.tensor<[seq=4, hidden=8], f64>,
      !mt.tensor<[hidden=8, ffn=16], f64> -> !mt.tensor<[seq=4, ffn=16], f64>
  return %0 : !mt.tensor<[seq=4, ffn=16], f64>
}

// -----

// Mixed precision: a bf16 contraction is a batched product of the bf16 operands into an f32
// accumulator (f32 fill), rounded to bf16 once, after the reshape back.
// CHECK-LABEL: func.func @bf16
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x4x16xf32>)
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<1x4x8xbf16>, tensor<1x8x16xbf16>) outs(%[[INIT]] : tensor<1x4x16xf32>)
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[P]] {{.*}} into tensor<4x16xf32>
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%[[R]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[B]]
func.func @bf16(%x: !mt.tensor<[seq=4, hidden=8], bf16>, %w: !mt.tensor<[hidden=8, ffn=16], bf16>)
    -> !mt.tensor<[seq=4, ffn=16], bf16> {
  %0 = mt.contract %x, %w over [hidden] : !mt.tensor<[seq=4, hidden=8], bf16>,
      !mt.tensor<[hidden=8, ffn=16], bf16> -> !mt.tensor<[seq=4, ffn=16], bf16>
  return %0 : !mt.tensor<[seq=4, ffn=16], bf16>
}
