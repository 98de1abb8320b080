// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-workspace-views | FileCheck %s

// Tests that each allocation becomes a view of its block of the workspace, at the offset
// the planner gives it (a and c, never live together, share bytes; b lies beside a), that
// the frees go, and that the function asks for the workspace (the bytes its views reach)
// once and hands it back before it returns.
// CHECK-DAG: func.func private @mtc_kernel_workspace(i64) -> !llvm.ptr
// CHECK-DAG: func.func private @mtc_kernel_workspace_release(!llvm.ptr)
// CHECK-LABEL: func.func @step
// CHECK: %[[BYTES:.*]] = arith.constant 192 : i64
// CHECK: %[[WS:.*]] = call @mtc_kernel_workspace(%[[BYTES]]) : (i64) -> !llvm.ptr
// CHECK: %[[A:.*]] = llvm.getelementptr %[[WS]][%[[AOFFSET:.*]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: llvm.insertvalue %[[A]], %{{.*}}[1] {mtc.workspace_ranges = array<i64: 0, 128>}
// CHECK: %[[ABYTES:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<128xi8>
// CHECK: %[[AVIEW:.*]] = memref.view %[[ABYTES]][%{{.*}}][] : memref<128xi8> to memref<16xf32>
// CHECK: memref.copy %{{.*}}, %[[AVIEW]]
// CHECK: %[[B:.*]] = llvm.getelementptr %[[WS]]
// CHECK: llvm.insertvalue %[[B]], %{{.*}}[1] {mtc.workspace_ranges = array<i64: 128, 192>}
// CHECK: memref.view %{{.*}} : memref<64xi8> to memref<4x4xf32>
// CHECK: %[[C:.*]] = llvm.getelementptr %[[WS]]
// CHECK: llvm.insertvalue %[[C]], %{{.*}}[1] {mtc.workspace_ranges = array<i64: 0, 32>}
// CHECK: memref.view %{{.*}} : memref<32xi8> to memref<8xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: call @mtc_kernel_workspace_release(%[[WS]]) : (!llvm.ptr) -> ()
// CHECK-NEXT: return
func.func @step(%x: memref<16xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  %b = memref.alloc() : memref<4x4xf32>
  memref.dealloc %a : memref<16xf32>
  %c = memref.alloc() : memref<8xf32>
  memref.dealloc %b : memref<4x4xf32>
  memref.dealloc %c : memref<8xf32>
  return
}

// -----

// Tests that a buffer a loop carries into the next iteration (two live at once) takes two
// offsets in turn, by the parity of the iteration, and that its conditional free goes.
// CHECK-LABEL: func.func @layers
// CHECK: %[[WS:.*]] = call @mtc_kernel_workspace
// CHECK: scf.for %[[I:.*]] = %[[LB:.*]] to %{{.*}} step %[[STEP:[^ ]*]] iter_args
// CHECK: %[[PHASE0:.*]] = arith.constant 64 : i64
// CHECK: %[[D:.*]] = arith.subi %[[I]], %[[LB]] : index
// CHECK: %[[IT:.*]] = arith.divui %[[D]], %[[STEP]] : index
// CHECK: %[[PHASE:.*]] = arith.remui %[[IT]], %{{.*}} : index
// CHECK: %[[ODD:.*]] = arith.cmpi eq, %[[PHASE]], %{{.*}} : index
// CHECK: %[[PHASE1:.*]] = arith.constant 128 : i64
// CHECK: %[[OFFSET:.*]] = arith.select %[[ODD]], %[[PHASE1]], %[[PHASE0]] : i64
// CHECK: %[[NEXT:.*]] = llvm.getelementptr %[[WS]][%[[OFFSET]]]
// CHECK: llvm.insertvalue %[[NEXT]], %{{.*}}[1] {mtc.workspace_ranges = array<i64: 64, 128, 128, 192>}
// CHECK: scf.if
// CHECK-NEXT: }
// CHECK-NOT: memref.dealloc
func.func @layers() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %true = arith.constant true
  %false = arith.constant false
  %first = memref.alloc() : memref<16xf32>
  %r:2 = scf.for %i = %c0 to %c2 step %c1 iter_args(%cur = %first, %owned = %false)
      -> (memref<16xf32>, i1) {
    %next = memref.alloc() : memref<16xf32>
    memref.copy %cur, %next : memref<16xf32> to memref<16xf32>
    scf.if %owned {
      memref.dealloc %cur : memref<16xf32>
    }
    scf.yield %next, %true : memref<16xf32>, i1
  }
  memref.dealloc %first : memref<16xf32>
  memref.dealloc %r#0 : memref<16xf32>
  return
}

// -----

// Tests that a called function asks for the workspace too and places its temporaries
// beside the caller's that live across the call: one plan for the functions of a call.
// CHECK-LABEL: func.func private @layer
// CHECK: call @mtc_kernel_workspace
// CHECK: llvm.insertvalue {{.*}} {mtc.workspace_ranges = array<i64: 256, 384>}
// CHECK: call @mtc_kernel_workspace_release
// CHECK-LABEL: func.func @caller
// CHECK: llvm.insertvalue {{.*}} {mtc.workspace_ranges = array<i64: 0, 256>}
// CHECK: call @layer()
func.func private @layer() {
  %t = memref.alloc() : memref<32xf32>
  memref.dealloc %t : memref<32xf32>
  return
}
func.func @caller() {
  %a = memref.alloc() : memref<64xf32>
  func.call @layer() : () -> ()
  memref.dealloc %a : memref<64xf32>
  return
}

// -----

// Tests that an allocation the planner cannot size stays an allocation with its free (the
// runtime's allocator serves it), and that a function without temporaries asks for no
// workspace.
// CHECK: module {
// CHECK-NEXT: func.func @dynamic
// CHECK-NOT: mtc_kernel_workspace
// CHECK: %[[D:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: memref.dealloc %[[D]]
// CHECK-LABEL: func.func @nothing
// CHECK-NEXT: return
func.func @dynamic(%n: index) {
  %d = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %d : memref<?xf32>
  return
}
func.func @nothing(%x: memref<4xf32>) {
  return
}

// -----

// Tests that the runtime's workspace function cannot be declared with another type.
// expected-error @+1 {{'mtc_kernel_workspace' is the runtime's workspace function and must be an external func.func of type '(i64) -> !llvm.ptr'}}
func.func private @mtc_kernel_workspace(i32) -> i32
func.func @step() {
  %a = memref.alloc() : memref<16xf32>
  memref.dealloc %a : memref<16xf32>
  return
}
