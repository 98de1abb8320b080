// RUN: mt-opt %s -split-input-file -mtc-workspace-alias-scopes | FileCheck %s

// Tests that each block of the workspace gets a scope and every access that reaches it
// (through getelementptr, casts and a descriptor's insertvalue/extractvalue to the insertion
// of the block's aligned pointer, which has its ranges) says it is apart from
// the blocks whose bytes it never shares (a [0, 64) and c [0, 32) share bytes; b [64, 128)
// shares none), and from the entry function's arguments (reached through the cast of a
// memref argument), which are apart from every block but not from each other; an access
// through anything else (here the workspace pointer itself) gets no scope.
// CHECK-DAG: #[[A:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "block 0">
// CHECK-DAG: #[[B:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "block 1">
// CHECK-DAG: #[[C:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "block 2">
// CHECK-DAG: #[[ARGS:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "arguments">
// CHECK-LABEL: func.func @step
// CHECK-NOT: mtc.workspace_ranges
// CHECK: llvm.store %{{.*}} {alias_scopes = [#[[A]]], noalias_scopes = [#[[B]], #[[ARGS]]]}
// CHECK: llvm.store %{{.*}} {alias_scopes = [#[[B]]], noalias_scopes = [#[[A]], #[[C]], #[[ARGS]]]}
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[C]]], noalias_scopes = [#[[B]], #[[ARGS]]]}
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[ARGS]]], noalias_scopes = [#[[A]], #[[B]], #[[C]]]}
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NEXT: return
!desc = !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
func.func @step(%ws: !llvm.ptr, %x: memref<16xf32>, %i: i64, %v: f32) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c64 = llvm.mlir.constant(64 : i64) : i64
  %poison = llvm.mlir.poison : !desc
  %a = llvm.insertvalue %ws, %poison[1] {mtc.workspace_ranges = array<i64: 0, 64>} : !desc
  %a2 = llvm.insertvalue %c0, %a[2] : !desc
  %bp = llvm.getelementptr %ws[%c64] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  %b = llvm.insertvalue %bp, %poison[1] {mtc.workspace_ranges = array<i64: 64, 128>} : !desc
  %c = llvm.insertvalue %ws, %poison[1] {mtc.workspace_ranges = array<i64: 0, 32>} : !desc
  %aligned = llvm.extractvalue %a2[1] : !desc
  %pa = llvm.getelementptr %aligned[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %pa : f32, !llvm.ptr
  %bm = builtin.unrealized_conversion_cast %b : !desc to memref<64xi8>
  %bd = builtin.unrealized_conversion_cast %bm : memref<64xi8> to !desc
  %ba = llvm.extractvalue %bd[1] : !desc
  %pb = llvm.getelementptr %ba[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %pb : f32, !llvm.ptr
  %ca = llvm.extractvalue %c[1] : !desc
  %pc = llvm.getelementptr %ca[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %lc = llvm.load %pc : !llvm.ptr -> f32
  %xd = builtin.unrealized_conversion_cast %x : memref<16xf32> to !desc
  %xa = llvm.extractvalue %xd[1] : !desc
  %px = llvm.getelementptr %xa[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %lx = llvm.load %px : !llvm.ptr -> f32
  %lw = llvm.load %ws : !llvm.ptr -> f32
  return
}

// -----

// Tests that the arguments of a function the module calls (which may be the caller's
// blocks) get a scope of that function's, apart from its own blocks only (allocated while
// the arguments are live), and that its blocks are apart from those arguments and from the
// entry functions' arguments.
// CHECK-DAG: #[[LARGS:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "arguments of layer">
// CHECK-DAG: #[[T:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "block 0">
// CHECK-DAG: #[[ARGS:alias_scope[0-9]*]] = #llvm.alias_scope<{{.*}}description = "arguments">
// CHECK-LABEL: func.func private @layer
// CHECK: llvm.store %{{.*}} {alias_scopes = [#[[LARGS]]], noalias_scopes = [#[[T]]]} : f32, !llvm.ptr
// CHECK: llvm.store %{{.*}} {alias_scopes = [#[[T]]], noalias_scopes = [#[[ARGS]], #[[LARGS]]]} : f32, !llvm.ptr
// CHECK-LABEL: func.func @entry
!desc = !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
func.func private @layer(%ws: !llvm.ptr, %y: memref<16xf32>, %v: f32) {
  %yd = builtin.unrealized_conversion_cast %y : memref<16xf32> to !desc
  %ya = llvm.extractvalue %yd[1] : !desc
  llvm.store %v, %ya : f32, !llvm.ptr
  %poison = llvm.mlir.poison : !desc
  %t = llvm.insertvalue %ws, %poison[1] {mtc.workspace_ranges = array<i64: 64, 128>} : !desc
  %ta = llvm.extractvalue %t[1] : !desc
  llvm.store %v, %ta : f32, !llvm.ptr
  return
}
func.func @entry(%ws: !llvm.ptr, %y: memref<16xf32>, %v: f32) {
  func.call @layer(%ws, %y, %v) : (!llvm.ptr, memref<16xf32>, f32) -> ()
  return
}
