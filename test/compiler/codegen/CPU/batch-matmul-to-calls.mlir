// RUN: mt-opt %s -split-input-file -mtc-batch-matmul-to-calls -verify-diagnostics | FileCheck %s

// Tests that an f32 batched product on buffers becomes a call of the runtime's GEMM on
// fully dynamic strided views, declared once (private, with a C interface) for every
// shape and layout.
// CHECK-LABEL: func.func private @mtc_batch_matmul_f32
// CHECK-SAME: (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @products
// CHECK-SAME: (%[[A:.*]]: memref<2x4x8xf32>, %[[B:.*]]: memref<2x8x16xf32>, %[[C:.*]]: memref<2x4x16xf32>, %[[V:.*]]: memref<1x8x4xf32, strided<[32, 1, 8]>>
// CHECK: %[[CA:.*]] = memref.cast %[[A]] : memref<2x4x8xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[CB:.*]] = memref.cast %[[B]]
// CHECK: %[[CC:.*]] = memref.cast %[[C]]
// CHECK: call @mtc_batch_matmul_f32(%[[CA]], %[[CB]], %[[CC]])
// CHECK: %[[CV:.*]] = memref.cast %[[V]] : memref<1x8x4xf32, strided<[32, 1, 8]>> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: call @mtc_batch_matmul_f32(%{{.*}}, %[[CV]], %{{.*}})
// CHECK-NOT: linalg.batch_matmul
func.func @products(%a: memref<2x4x8xf32>, %b: memref<2x8x16xf32>, %c: memref<2x4x16xf32>,
                    %v: memref<1x8x4xf32, strided<[32, 1, 8]>>, %x: memref<1x4x8xf32>,
                    %y: memref<1x4x4xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf32>, memref<2x8x16xf32>) outs(%c : memref<2x4x16xf32>)
  linalg.batch_matmul ins(%x, %v : memref<1x4x8xf32>, memref<1x8x4xf32, strided<[32, 1, 8]>>) outs(%y : memref<1x4x4xf32>)
  return
}

// -----

// Tests that a product of two bf16 inputs into an f32 result calls the bf16 GEMM on the
// inputs as they are (bf16 operands, any strides), declared once beside nothing else.
// CHECK-LABEL: func.func private @mtc_batch_matmul_bf16
// CHECK-SAME: (memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NOT: mtc_batch_matmul_f32
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: (%[[A:.*]]: memref<1x4x8xbf16>, %[[B:.*]]: memref<1x8x2xbf16, strided<[16, 1, 8]>>, %[[C:.*]]: memref<1x4x2xf32>)
// CHECK-NOT: memref.alloc
// CHECK: %[[CA:.*]] = memref.cast %[[A]] : memref<1x4x8xbf16> to memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[CB:.*]] = memref.cast %[[B]] : memref<1x8x2xbf16, strided<[16, 1, 8]>> to memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[CC:.*]] = memref.cast %[[C]]
// CHECK: call @mtc_batch_matmul_bf16(%[[CA]], %[[CB]], %[[CC]])
// CHECK-NOT: linalg.batch_matmul

func.func @mixed(%a: memref<1x4x8xbf16>, %b: memref<1x8x2xbf16, strided<[16, 1, 8]>>, %c: memref<1x4x2xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<1x4x8xbf16>, memref<1x8x2xbf16, strided<[16, 1, 8]>>) outs(%c : memref<1x4x2xf32>)
  return
}

// -----

// Tests that f16 inputs, and a bf16 input beside an f32 one, are widened to f32 copies
// for the f32 GEMM (the runtime's bf16 GEMM takes two bf16 inputs).
// CHECK-LABEL: func.func @widened
// CHECK-SAME: (%[[H:.*]]: memref<1x4x8xf16>, %[[F:.*]]: memref<1x8x2xf32>, %[[B:.*]]: memref<1x4x8xbf16>, %[[C:.*]]: memref<1x4x2xf32>)
// CHECK: %[[HW:.*]] = memref.alloc() : memref<1x4x8xf32>
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: %[[CH:.*]] = memref.cast %[[HW]]
// CHECK: call @mtc_batch_matmul_f32(%[[CH]],
// CHECK: %[[BW:.*]] = memref.alloc() : memref<1x4x8xf32>
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[CB:.*]] = memref.cast %[[BW]]
// CHECK: call @mtc_batch_matmul_f32(%[[CB]],
// CHECK-NOT: mtc_batch_matmul_bf16
func.func @widened(%h: memref<1x4x8xf16>, %f: memref<1x8x2xf32>, %b: memref<1x4x8xbf16>, %c: memref<1x4x2xf32>) {
  linalg.batch_matmul ins(%h, %f : memref<1x4x8xf16>, memref<1x8x2xf32>) outs(%c : memref<1x4x2xf32>)
  linalg.batch_matmul ins(%b, %f : memref<1x4x8xbf16>, memref<1x8x2xf32>) outs(%c : memref<1x4x2xf32>)
  return
}

// -----

// Tests that products of other element types (a bf16 result among them: its accumulation
// is bf16, not what the f32 GEMM computes), and products on tensors, stay linalg (and
// that nothing is declared then).
// CHECK-LABEL: func.func @others
// CHECK-NOT: mtc_batch_matmul_f32
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x2x2xf64>, memref<1x2x2xf64>)
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : memref<1x2x2xbf16>, memref<1x2x2xbf16>) outs(%{{.*}} : memref<1x2x2xbf16>)
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<1x2x2xf32>, tensor<1x2x2xf32>)
func.func @others(%a: memref<1x2x2xf64>, %c: memref<1x2x2xf64>, %t: tensor<1x2x2xf32>, %h: memref<1x2x2xbf16>) -> tensor<1x2x2xf32> {
  linalg.batch_matmul ins(%a, %a : memref<1x2x2xf64>, memref<1x2x2xf64>) outs(%c : memref<1x2x2xf64>)
  linalg.batch_matmul ins(%h, %h : memref<1x2x2xbf16>, memref<1x2x2xbf16>) outs(%h : memref<1x2x2xbf16>)
  %r = linalg.batch_matmul ins(%t, %t : tensor<1x2x2xf32>, tensor<1x2x2xf32>) outs(%t : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
  return %r : tensor<1x2x2xf32>
}

// -----

// Tests that a symbol of the reserved name that is not the GEMM's declaration is an error.
// expected-error @+1 {{'func.func' op 'mtc_batch_matmul_f32' is reserved for the f32 batched matrix product: it must be an external function of type}}
func.func @mtc_batch_matmul_f32(%a: memref<1x2x2xf32>) {
  return
}
func.func @product(%a: memref<1x2x2xf32>, %c: memref<1x2x2xf32>) {
  linalg.batch_matmul ins(%a, %a : memref<1x2x2xf32>, memref<1x2x2xf32>) outs(%c : memref<1x2x2xf32>)
  return
}

// -----

// Tests that the bf16 GEMM's name is reserved alike (a declaration of another type).
// expected-error @+1 {{'func.func' op 'mtc_batch_matmul_bf16' is reserved for the bf16 batched matrix product: it must be an external function of type}}
func.func private @mtc_batch_matmul_bf16(memref<1x2x2xbf16>)
func.func @bf16_product(%a: memref<1x2x2xbf16>, %c: memref<1x2x2xf32>) {
  linalg.batch_matmul ins(%a, %a : memref<1x2x2xbf16>, memref<1x2x2xbf16>) outs(%c : memref<1x2x2xf32>)
  return
}
