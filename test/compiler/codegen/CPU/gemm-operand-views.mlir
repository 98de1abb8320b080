// RUN: mt-opt %s --mtc-gemm-operand-views --split-input-file | FileCheck %s

// Tests that a transposed matrix (a tied embedding read as [hidden, vocab]) becomes a
// strided view of the original, with the copy erased.
// CHECK-LABEL: func.func @transposed_rhs
// CHECK-SAME: (%[[X:.*]]: memref<1x4x8xf32>, %[[W:.*]]: memref<16x8xf32>, %[[OUT:.*]]: memref<1x4x16xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[V:.*]] = memref.reinterpret_cast %[[W]] to offset: [0], sizes: [1, 8, 16], strides: [1, 1, 8]
// CHECK: linalg.batch_matmul ins(%[[X]], %[[V]] : memref<1x4x8xf32>, memref<1x8x16xf32, strided<[1, 1, 8]>>) outs(%[[OUT]] : memref<1x4x16xf32>)
// CHECK-NOT: memref.alloc
// CHECK: return
func.func @transposed_rhs(%x: memref<1x4x8xf32>, %w: memref<16x8xf32>, %out: memref<1x4x16xf32>) {
  %t = memref.alloc() : memref<8x16xf32>
  linalg.transpose ins(%w : memref<16x8xf32>) outs(%t : memref<8x16xf32>) permutation = [1, 0]
  %e = memref.expand_shape %t [[0, 1], [2]] output_shape [1, 8, 16] : memref<8x16xf32> into memref<1x8x16xf32>
  linalg.batch_matmul ins(%x, %e : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%out : memref<1x4x16xf32>)
  return
}

// -----

// Tests attention's scores, q [b, s, h, d] and k [b, t, h, d] batched over (b, h): the batch
// does not merge into one stride, so the product loops over b with views of q and k offset
// by b's stride, and subviews of the result.
// CHECK-LABEL: func.func @attention_scores
// CHECK-SAME: (%[[Q:.*]]: memref<2x4x3x5xf32>, %[[K:.*]]: memref<2x4x3x5xf32>, %[[OUT:.*]]: memref<6x4x4xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[QOFF:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK: memref.reinterpret_cast %[[Q]] to offset: [%[[QOFF]]], sizes: [3, 4, 5], strides: [5, 15, 1]
// CHECK: memref.reinterpret_cast %[[K]] to offset: [%{{.*}}], sizes: [3, 5, 4], strides: [5, 1, 15]
// CHECK: memref.subview %[[OUT]][%{{.*}}, 0, 0] [3, 4, 4] [1, 1, 1]
// CHECK: linalg.batch_matmul
// CHECK: }
// CHECK-NOT: memref.alloc
// CHECK: return
func.func @attention_scores(%q: memref<2x4x3x5xf32>, %k: memref<2x4x3x5xf32>, %out: memref<6x4x4xf32>) {
  %tq = memref.alloc() : memref<2x3x4x5xf32>
  linalg.transpose ins(%q : memref<2x4x3x5xf32>) outs(%tq : memref<2x3x4x5xf32>) permutation = [0, 2, 1, 3]
  %cq = memref.collapse_shape %tq [[0, 1], [2], [3]] : memref<2x3x4x5xf32> into memref<6x4x5xf32>
  %tk = memref.alloc() : memref<2x3x5x4xf32>
  linalg.transpose ins(%k : memref<2x4x3x5xf32>) outs(%tk : memref<2x3x5x4xf32>) permutation = [0, 2, 3, 1]
  %ck = memref.collapse_shape %tk [[0, 1], [2], [3]] : memref<2x3x5x4xf32> into memref<6x5x4xf32>
  linalg.batch_matmul ins(%cq, %ck : memref<6x4x5xf32>, memref<6x5x4xf32>) outs(%out : memref<6x4x4xf32>)
  return
}

// -----

// Tests that a copy is kept when its source may change before the product (a write to the
// source between them), when the copy has another reader, when the copy itself is written
// in place before the product, and when a group of dimensions does not merge (rows
// gathered from two dimensions that are not neighbours).
// CHECK-LABEL: func.func @written_between
// CHECK: linalg.transpose
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x4x8xf32>, memref<1x8x16xf32>)
// CHECK-LABEL: func.func @copy_read_again
// CHECK: linalg.transpose
// CHECK: memref.reinterpret_cast
// CHECK: linalg.batch_matmul
// CHECK: memref.copy
// CHECK-LABEL: func.func @copy_written_in_place
// CHECK: linalg.transpose
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x4x8xf32>, memref<1x8x16xf32>)
// CHECK-LABEL: func.func @rows_do_not_merge
// CHECK: linalg.transpose
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x6x5xf32>, memref<1x5x4xf32>)
func.func @written_between(%x: memref<1x4x8xf32>, %w: memref<16x8xf32>, %out: memref<1x4x16xf32>) {
  %t = memref.alloc() : memref<8x16xf32>
  linalg.transpose ins(%w : memref<16x8xf32>) outs(%t : memref<8x16xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%w : memref<16x8xf32>)
  %e = memref.expand_shape %t [[0, 1], [2]] output_shape [1, 8, 16] : memref<8x16xf32> into memref<1x8x16xf32>
  linalg.batch_matmul ins(%x, %e : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%out : memref<1x4x16xf32>)
  return
}
func.func @copy_read_again(%x: memref<1x4x8xf32>, %w: memref<16x8xf32>, %out: memref<1x4x16xf32>, %keep: memref<8x16xf32>) {
  %t = memref.alloc() : memref<8x16xf32>
  linalg.transpose ins(%w : memref<16x8xf32>) outs(%t : memref<8x16xf32>) permutation = [1, 0]
  %e = memref.expand_shape %t [[0, 1], [2]] output_shape [1, 8, 16] : memref<8x16xf32> into memref<1x8x16xf32>
  linalg.batch_matmul ins(%x, %e : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%out : memref<1x4x16xf32>)
  memref.copy %t, %keep : memref<8x16xf32> to memref<8x16xf32>
  return
}
func.func @copy_written_in_place(%x: memref<1x4x8xf32>, %w: memref<16x8xf32>, %out: memref<1x4x16xf32>) {
  %t = memref.alloc() : memref<8x16xf32>
  linalg.transpose ins(%w : memref<16x8xf32>) outs(%t : memref<8x16xf32>) permutation = [1, 0]
  %two = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%t : memref<8x16xf32>) {
  ^bb0(%v: f32):
    %d = arith.mulf %v, %two : f32
    linalg.yield %d : f32
  }
  %e = memref.expand_shape %t [[0, 1], [2]] output_shape [1, 8, 16] : memref<8x16xf32> into memref<1x8x16xf32>
  linalg.batch_matmul ins(%x, %e : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%out : memref<1x4x16xf32>)
  return
}
func.func @rows_do_not_merge(%x: memref<2x5x3xf32>, %w: memref<1x5x4xf32>, %out: memref<1x6x4xf32>) {
  %t = memref.alloc() : memref<2x3x5xf32>
  linalg.transpose ins(%x : memref<2x5x3xf32>) outs(%t : memref<2x3x5xf32>) permutation = [0, 2, 1]
  %c = memref.collapse_shape %t [[0, 1], [2]] : memref<2x3x5xf32> into memref<6x5xf32>
  %e = memref.expand_shape %c [[0, 1], [2]] output_shape [1, 6, 5] : memref<6x5xf32> into memref<1x6x5xf32>
  linalg.batch_matmul ins(%e, %w : memref<1x6x5xf32>, memref<1x5x4xf32>) outs(%out : memref<1x6x4xf32>)
  return
}

// -----

// Tests attention's output: the product [b*h, s, d] is transposed into [b, s, h, d]. The
// product now accumulates into views of the destination, which is zeroed where the
// product's buffer was (its allocation moved up), and the transpose is gone.
// CHECK-LABEL: func.func @attention_output
// CHECK-SAME: (%[[P:.*]]: memref<2x4x3x4xf32>, %[[V:.*]]: memref<2x4x3x5xf32>, %[[OUT:.*]]: memref<2x4x3x5xf32>)
// CHECK: %[[R:.*]] = memref.alloc() : memref<2x4x3x5xf32>
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[R]] : memref<2x4x3x5xf32>)
// CHECK: scf.for
// CHECK: memref.reinterpret_cast %[[V]] to offset: [%{{.*}}], sizes: [3, 4, 5], strides: [5, 15, 1]
// CHECK: memref.reinterpret_cast %[[R]] to offset: [%{{.*}}], sizes: [3, 4, 5], strides: [5, 15, 1]
// CHECK: linalg.batch_matmul
// CHECK: }
// CHECK-NOT: linalg.transpose
// CHECK: memref.copy %[[R]], %[[OUT]]
func.func @attention_output(%p: memref<2x4x3x4xf32>, %v: memref<2x4x3x5xf32>, %out: memref<2x4x3x5xf32>) {
  %tp = memref.alloc() : memref<2x3x4x4xf32>
  linalg.transpose ins(%p : memref<2x4x3x4xf32>) outs(%tp : memref<2x3x4x4xf32>) permutation = [0, 2, 1, 3]
  %cp = memref.collapse_shape %tp [[0, 1], [2], [3]] : memref<2x3x4x4xf32> into memref<6x4x4xf32>
  %tv = memref.alloc() : memref<2x3x4x5xf32>
  linalg.transpose ins(%v : memref<2x4x3x5xf32>) outs(%tv : memref<2x3x4x5xf32>) permutation = [0, 2, 1, 3]
  %cv = memref.collapse_shape %tv [[0, 1], [2], [3]] : memref<2x3x4x5xf32> into memref<6x4x5xf32>
  %zero = arith.constant 0.0 : f32
  %product = memref.alloc() : memref<6x4x5xf32>
  linalg.fill ins(%zero : f32) outs(%product : memref<6x4x5xf32>)
  linalg.batch_matmul ins(%cp, %cv : memref<6x4x4xf32>, memref<6x4x5xf32>) outs(%product : memref<6x4x5xf32>)
  %e = memref.expand_shape %product [[0, 1], [2], [3]] output_shape [2, 3, 4, 5] : memref<6x4x5xf32> into memref<2x3x4x5xf32>
  %r = memref.alloc() : memref<2x4x3x5xf32>
  linalg.transpose ins(%e : memref<2x3x4x5xf32>) outs(%r : memref<2x4x3x5xf32>) permutation = [0, 2, 1, 3]
  memref.copy %r, %out : memref<2x4x3x5xf32> to memref<2x4x3x5xf32>
  return
}

// -----

// Tests that a product read by something besides its transpose keeps its buffer.
// CHECK-LABEL: func.func @product_read_again
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%{{.*}} : memref<1x4x16xf32>)
// CHECK: linalg.transpose
func.func @product_read_again(%x: memref<1x4x8xf32>, %w: memref<1x8x16xf32>, %out: memref<16x4xf32>, %keep: memref<1x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %product = memref.alloc() : memref<1x4x16xf32>
  linalg.fill ins(%zero : f32) outs(%product : memref<1x4x16xf32>)
  linalg.batch_matmul ins(%x, %w : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%product : memref<1x4x16xf32>)
  memref.copy %product, %keep : memref<1x4x16xf32> to memref<1x4x16xf32>
  %c = memref.collapse_shape %product [[0, 1], [2]] : memref<1x4x16xf32> into memref<4x16xf32>
  linalg.transpose ins(%c : memref<4x16xf32>) outs(%out : memref<16x4xf32>) permutation = [1, 0]
  return
}

// -----

// Tests that the product writes straight into an argument it is transposed into, and keeps
// its buffer when the destination is read between the product and the transpose, through a
// view.
// CHECK-LABEL: func.func @destination_untouched
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<1x16x4xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : memref<1x16x4xf32>)
// CHECK: %[[V:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [1, 4, 16], strides: [1, 1, 4]
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%[[V]]
// CHECK-NOT: linalg.transpose
// CHECK-LABEL: func.func @destination_read_between
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%{{.*}} : memref<1x4x16xf32>)
// CHECK: memref.copy
// CHECK: linalg.transpose
func.func @destination_untouched(%x: memref<1x4x8xf32>, %w: memref<1x8x16xf32>, %out: memref<1x16x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %product = memref.alloc() : memref<1x4x16xf32>
  linalg.fill ins(%zero : f32) outs(%product : memref<1x4x16xf32>)
  linalg.batch_matmul ins(%x, %w : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%product : memref<1x4x16xf32>)
  linalg.transpose ins(%product : memref<1x4x16xf32>) outs(%out : memref<1x16x4xf32>) permutation = [0, 2, 1]
  return
}
func.func @destination_read_between(%x: memref<1x4x8xf32>, %w: memref<1x8x16xf32>, %out: memref<1x16x4xf32>, %keep: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %product = memref.alloc() : memref<1x4x16xf32>
  linalg.fill ins(%zero : f32) outs(%product : memref<1x4x16xf32>)
  linalg.batch_matmul ins(%x, %w : memref<1x4x8xf32>, memref<1x8x16xf32>) outs(%product : memref<1x4x16xf32>)
  %row = memref.subview %out[0, 0, 0] [1, 1, 4] [1, 1, 1] : memref<1x16x4xf32> to memref<4xf32, strided<[1]>>
  memref.copy %row, %keep : memref<4xf32, strided<[1]>> to memref<4xf32>
  linalg.transpose ins(%product : memref<1x4x16xf32>) outs(%out : memref<1x16x4xf32>) permutation = [0, 2, 1]
  return
}
