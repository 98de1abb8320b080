// RUN: mt-opt %s -split-input-file -mtc-request-c-interfaces | FileCheck %s

// Tests that public functions with a body get llvm.emit_c_interface and that private
// functions (layers) and external declarations do not.
// CHECK-LABEL: func.func private @runtime_function(memref<4xf32>)
// CHECK-NOT: llvm.emit_c_interface
// CHECK-LABEL: func.func private @layer
// CHECK-NOT: llvm.emit_c_interface
// CHECK-LABEL: func.func @step
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func private @runtime_function(memref<4xf32>)
func.func private @layer(%x: memref<4xf32>) {
  return
}
func.func @step(%x: memref<4xf32>) {
  func.call @layer(%x) : (memref<4xf32>) -> ()
  func.call @runtime_function(%x) : (memref<4xf32>) -> ()
  return
}

// -----

// Tests that a function already marked keeps a single attribute.
// CHECK-LABEL: func.func @marked
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NOT: llvm.emit_c_interface
func.func @marked() attributes {llvm.emit_c_interface} {
  return
}
