// RUN: mt-opt %s --mtc-select-parallel-loops --split-input-file | FileCheck %s
// RUN: mt-opt %s --mtc-select-parallel-loops="min-work=16 min-parallel=2" --split-input-file | FileCheck %s --check-prefix=SMALL

// Tests that a large parallel nest keeps its leading dimension parallel (512 iterations, at
// least min-parallel) and runs the other as a sequential loop inside each iteration.
// CHECK-LABEL: func.func @large
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c512) step (%c1) {
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c256 step %c1 {
// CHECK-NEXT: memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK-NOT: scf.parallel
func.func @large(%a: memref<512x256xf32>, %b: memref<512x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c512, %c256) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<512x256xf32>
    memref.store %x, %b[%i, %j] : memref<512x256xf32>
  }
  return
}

// -----

// Tests that leading dimensions stay parallel together until they give min-parallel
// iterations (2 x 64 here), the innermost one still a loop.
// CHECK-LABEL: func.func @short_leading
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c2, %c64) step (%c1, %c1) {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c1024 step %c1 {
func.func @short_leading(%a: memref<2x64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c2, %c64, %c1024) step (%c1, %c1, %c1) {
    memref.store %zero, %a[%i, %j, %k] : memref<2x64x1024xf32>
  }
  return
}

// -----

// Tests that a small nest becomes sequential loops in the order of its dimensions, unless
// the threshold is lowered (SMALL).
// CHECK-LABEL: func.func @tiny
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1 {
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c8 step %c1 {
// CHECK-NEXT: memref.load %{{.*}}[%[[I]], %[[J]]]
// SMALL-LABEL: func.func @tiny
// SMALL: scf.parallel (%{{.*}}) = (%c0) to (%c4) step (%c1) {
// SMALL-NEXT: scf.for
func.func @tiny(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<4x8xf32>
    memref.store %x, %b[%i, %j] : memref<4x8xf32>
  }
  return
}

// -----

// Tests that the work of a nest counts its sequential inner loops: 64 rows of a 2048-long
// reduction are enough for threads, and the reduction stays a loop inside each row.
// CHECK-LABEL: func.func @row_sums
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c64) step (%c1) {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c2048 step %c1 {
func.func @row_sums(%a: memref<64x2048xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c2048 = arith.constant 2048 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    scf.for %k = %c0 to %c2048 step %c1 {
      %x = memref.load %a[%i, %k] : memref<64x2048xf32>
      %s = memref.load %b[%i] : memref<64xf32>
      %r = arith.addf %s, %x : f32
      memref.store %r, %b[%i] : memref<64xf32>
    }
  }
  return
}

// -----

// Tests that a parallel loop inside a sequential one (the kept dimension of a column sum,
// whose reduction dimension is outer) becomes sequential: threads would split a reduction
// dimension's iterations, with a team started per iteration.
// CHECK-LABEL: func.func @column_sums
// CHECK-NOT: scf.parallel
// CHECK: scf.for %{{.*}} = %c0 to %c1024 step %c1 {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c512 step %c1 {
// CHECK-NOT: scf.parallel
// SMALL-LABEL: func.func @column_sums
// SMALL-NOT: scf.parallel
func.func @column_sums(%a: memref<1024x512xf32>, %b: memref<512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %c1024 = arith.constant 1024 : index
  scf.for %k = %c0 to %c1024 step %c1 {
    scf.parallel (%j) = (%c0) to (%c512) step (%c1) {
      %x = memref.load %a[%k, %j] : memref<1024x512xf32>
      %s = memref.load %b[%j] : memref<512xf32>
      %r = arith.addf %s, %x : f32
      memref.store %r, %b[%j] : memref<512xf32>
    }
  }
  return
}

// -----

// Tests that a parallel loop nested in a kept one becomes sequential (one team per nest).
// CHECK-LABEL: func.func @nested
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c512) step (%c1) {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c256 step %c1 {
// CHECK-NOT: scf.parallel
// SMALL-LABEL: func.func @nested
// SMALL: scf.parallel
// SMALL-NEXT: scf.for
func.func @nested(%a: memref<512x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c256) step (%c1) {
      memref.store %zero, %a[%i, %j] : memref<512x256xf32>
    }
  }
  return
}
