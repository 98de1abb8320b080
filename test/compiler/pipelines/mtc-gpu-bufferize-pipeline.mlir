// RUN: mt-opt %s -mtc-to-linalg-pipeline -mtc-gpu-bufferize-pipeline | FileCheck %s

// Tests the GPU backend's buffers on a contraction followed by an elementwise op: the
// parameter declaration is gone, the result is an out-parameter, and the f32 product is a
// call of the runtime's GEMM (not a linalg op that would become a naive kernel); no
// deallocation is placed (the host code's are, once the kernels are outlined:
// mtc-gpu-host-deallocation-pipeline).
// CHECK-NOT: mt.param
// CHECK-LABEL: func.func private @mtc_batch_matmul_f32
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:.*]]: memref<2x4xf32>, %[[W:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<2x8xf32>)
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @mtc_batch_matmul_f32(
// CHECK-NOT: linalg.batch_matmul
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK-NOT: memref.dealloc
// CHECK: return
module attributes {mt.dims = {batch = 2 : i64, hidden = 4 : i64, ffn = 8 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4, ffn=8], f32> init zeros
  func.func @step(%x: !mt.tensor<[batch=2, hidden=4], f32>, %w: !mt.tensor<[hidden=4, ffn=8], f32>) -> !mt.tensor<[batch=2, ffn=8], f32> {
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[hidden=4, ffn=8], f32> -> !mt.tensor<[batch=2, ffn=8], f32>
    %y = mt.tanh %h : !mt.tensor<[batch=2, ffn=8], f32>
    return %y : !mt.tensor<[batch=2, ffn=8], f32>
  }
}
