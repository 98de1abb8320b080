// RUN: mt-opt %s -mtc-cpu-to-llvm-pipeline -split-input-file | FileCheck %s

// Tests that a large elementwise op runs on OpenMP threads: one parallel region with a
// work-sharing loop over the rows, the columns a sequential loop inside each iteration.
#map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: llvm.func @large_elementwise(
// CHECK: omp.parallel {
// CHECK-NEXT: omp.wsloop {
// CHECK-NEXT: omp.loop_nest (%{{.*}}) : i64 =
// CHECK: llvm.fadd
// CHECK: omp.yield
// CHECK: omp.terminator
func.func @large_elementwise(%a: memref<512x256xf32>, %b: memref<512x256xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<512x256xf32>) outs(%b : memref<512x256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %r = arith.addf %x, %x : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Tests that a small elementwise op stays on the calling thread: starting a team would
// cost more than the loop.
#map = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: llvm.func @tiny_elementwise(
// CHECK-NOT: omp.
// CHECK: llvm.fadd
// CHECK-NOT: omp.
// CHECK: llvm.return
func.func @tiny_elementwise(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %r = arith.addf %x, %x : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Tests that a large row sum splits its rows among the threads and keeps each row's
// reduction a sequential loop inside one iteration.
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: llvm.func @large_row_sum(
// CHECK: omp.parallel {
// CHECK: omp.loop_nest (%{{.*}}) : i64 =
// CHECK: llvm.br ^[[HEADER:.*]](
// CHECK: ^[[HEADER]]({{.*}}):
// CHECK: llvm.cond_br
// CHECK: llvm.fadd
// CHECK: llvm.br ^[[HEADER]](
// CHECK: omp.yield
func.func @large_row_sum(%a: memref<512x256xf32>, %b: memref<512xf32>) {
  linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<512x256xf32>) outs(%b : memref<512xf32>) {
  ^bb0(%x: f32, %y: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Tests that a large column sum (a bias gradient: the reduction dimension outermost, so
// that the inner loop walks contiguous rows) runs on one thread: its parallel dimension is
// inside the reduction, and no loop is split among threads across a reduction dimension.
#map = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: llvm.func @large_column_sum(
// CHECK-NOT: omp.
// CHECK: llvm.fadd
// CHECK-NOT: omp.
// CHECK: llvm.return
func.func @large_column_sum(%a: memref<512x256xf32>, %b: memref<256xf32>) {
  linalg.generic {indexing_maps = [#map, #col], iterator_types = ["reduction", "parallel"]}
      ins(%a : memref<512x256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  }
  return
}
