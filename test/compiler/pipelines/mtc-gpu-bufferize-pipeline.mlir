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
// Tests that the GPU backend's optimizer step updates in place without a branch (its host
// code cannot read the norm in device memory): each update kernel takes the norm as an
// input and keeps the old element unless it is finite; no copy, no temporary, no result.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[G:[^:]*]]: memref<8xf32> {mt.grad = @w}, %[[PW:[^:]*]]: memref<8xf32> {mt.param = @w}, %[[M:[^:]*]]: memref<8xf32> {mt.state = @w.m}, %[[NORM:[^:]*]]: memref<f32> {mt.buffer = "grad_norm"}) {
// CHECK-NOT: scf.if
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic {{.*}} ins(%[[G]], %[[M]], %[[NORM]] : memref<8xf32>, memref<8xf32>, memref<f32>) outs(%[[M]] : memref<8xf32>)
// CHECK-NEXT: ^bb0(%[[GI:[^:]*]]: f32, %[[MI:[^:]*]]: f32, %[[NI:[^:]*]]: f32,
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[MI]], %[[GI]] : f32
// CHECK-NEXT: %[[OK:.*]] = arith.cmpf olt, %[[NI]]
// CHECK-NEXT: arith.select %[[OK]], %[[SUM]], %[[MI]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[PW]], %[[M]], %[[NORM]] : memref<8xf32>, memref<8xf32>, memref<f32>) outs(%[[PW]] : memref<8xf32>)
// CHECK-NOT: memref.copy
// CHECK: return{{$}}
#uid = affine_map<(d0) -> (d0)>
#uscalar = affine_map<(d0) -> ()>
module attributes {mt.dims = {batch = 2 : i64, hidden = 4 : i64, ffn = 8 : i64}} {
  mt.param @w : !mt.tensor<[hidden=4, ffn=8], f32> init zeros
  func.func @step(%x: !mt.tensor<[batch=2, hidden=4], f32>, %w: !mt.tensor<[hidden=4, ffn=8], f32>) -> !mt.tensor<[batch=2, ffn=8], f32> {
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, hidden=4], f32>, !mt.tensor<[hidden=4, ffn=8], f32> -> !mt.tensor<[batch=2, ffn=8], f32>
    %y = mt.tanh %h : !mt.tensor<[batch=2, ffn=8], f32>
    return %y : !mt.tensor<[batch=2, ffn=8], f32>
  }
  func.func @optimizer_step(%g: tensor<8xf32> {mt.grad = @w}, %w: tensor<8xf32> {mt.param = @w},
                            %m: tensor<8xf32> {mt.state = @w.m})
      -> (tensor<f32> {mt.buffer = "grad_norm"}, tensor<8xf32> {mt.param = @w},
          tensor<8xf32> {mt.state = @w.m}) {
    %zero = tensor.empty() : tensor<f32>
    %sq = linalg.generic {indexing_maps = [#uid, #uscalar], iterator_types = ["reduction"]}
        ins(%g : tensor<8xf32>) outs(%zero : tensor<f32>) {
    ^bb0(%a: f32, %acc: f32):
      %p = arith.mulf %a, %a : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    } -> tensor<f32>
    %e0 = tensor.empty() : tensor<8xf32>
    %m2 = linalg.generic {indexing_maps = [#uid, #uid, #uid], iterator_types = ["parallel"]}
        ins(%g, %m : tensor<8xf32>, tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
    ^bb0(%gi: f32, %mi: f32, %o: f32):
      %n = arith.addf %mi, %gi : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    %e1 = tensor.empty() : tensor<8xf32>
    %w2 = linalg.generic {indexing_maps = [#uid, #uid, #uid], iterator_types = ["parallel"]}
        ins(%w, %m2 : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
    ^bb0(%wi: f32, %mi: f32, %o: f32):
      %n = arith.subf %wi, %mi : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %sq, %w2, %m2 : tensor<f32>, tensor<8xf32>, tensor<8xf32>
  }
}
