// RUN: mt-opt %s -mtc-batch-matmul-to-calls=bf16-gemm=false | FileCheck %s

// Tests that with bf16-gemm=false each bf16 input is read through a contiguous f32 copy
// (alloc + extf generic) before the f32 call.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: (%[[A:.*]]: memref<1x4x8xbf16>, %[[B:.*]]: memref<1x8x2xbf16, strided<[16, 1, 8]>>, %[[C:.*]]: memref<1x4x2xf32>)
// CHECK: %[[AW:.*]] = memref.alloc() : memref<1x4x8xf32>
// CHECK: linalg.generic {{.*}} ins(%[[A]] : memref<1x4x8xbf16>) outs(%[[AW]] : memref<1x4x8xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[CA:.*]] = memref.cast %[[AW]]
// CHECK: %[[BW:.*]] = memref.alloc() : memref<1x8x2xf32>
// CHECK: linalg.generic {{.*}} ins(%[[B]] : memref<1x8x2xbf16, strided<[16, 1, 8]>>) outs(%[[BW]] : memref<1x8x2xf32>)
// CHECK: %[[CB:.*]] = memref.cast %[[BW]]
// CHECK: %[[CC:.*]] = memref.cast %[[C]]
// CHECK: call @mtc_batch_matmul_f32(%[[CA]], %[[CB]], %[[CC]])
// CHECK-NOT: linalg.batch_matmul
// CHECK-NOT: mtc_batch_matmul_bf16
func.func @mixed(%a: memref<1x4x8xbf16>, %b: memref<1x8x2xbf16, strided<[16, 1, 8]>>, %c: memref<1x4x2xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<1x4x8xbf16>, memref<1x8x2xbf16, strided<[16, 1, 8]>>) outs(%c : memref<1x4x2xf32>)
  return
}
