// RUN: mt-opt %s -split-input-file -mtc-expand-strided-copies | FileCheck %s

// Tests that a copy out of a strided view (a column block of a matrix) becomes linalg.copy.
// CHECK-LABEL: func.func @strided_source
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<4x2xf32, strided<[8, 1], offset: 2>>) outs(%{{.*}} : memref<4x2xf32>)
func.func @strided_source(%x: memref<4x8xf32>, %out: memref<4x2xf32>) {
  %v = memref.subview %x[0, 2] [4, 2] [1, 1] : memref<4x8xf32> to memref<4x2xf32, strided<[8, 1], offset: 2>>
  memref.copy %v, %out : memref<4x2xf32, strided<[8, 1], offset: 2>> to memref<4x2xf32>
  return
}

// -----

// Tests that a copy into a strided view becomes linalg.copy too.
// CHECK-LABEL: func.func @strided_target
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<4x2xf32>) outs(%{{.*}} : memref<4x2xf32, strided<[8, 1], offset: 2>>)
func.func @strided_target(%x: memref<4x2xf32>, %out: memref<4x8xf32>) {
  %v = memref.subview %out[0, 2] [4, 2] [1, 1] : memref<4x8xf32> to memref<4x2xf32, strided<[8, 1], offset: 2>>
  memref.copy %x, %v : memref<4x2xf32> to memref<4x2xf32, strided<[8, 1], offset: 2>>
  return
}

// -----

// Tests that a copy between contiguous buffers stays memref.copy (a memcpy).
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<4x8xf32> to memref<4x8xf32>
// CHECK-NOT: linalg.copy
func.func @contiguous(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
  memref.copy %x, %out : memref<4x8xf32> to memref<4x8xf32>
  return
}
