// RUN: mt-opt %s -split-input-file -mtc-early-deallocation | FileCheck %s

// Tests that a temporary used by one op is freed right after it, before the next
// allocation, and the other after its last use.
// CHECK-LABEL: func.func @freed_after_last_use
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.load %[[A]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.store %{{.*}}, %[[B]]
// CHECK-NEXT: memref.copy %[[B]]
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return
func.func @freed_after_last_use(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<4xf32>
  %x = memref.load %a[%c0] : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  memref.store %x, %b[%c0] : memref<4xf32>
  memref.copy %b, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return
}

// -----

// Tests that uses through a view, inside a loop, and through an address passed to a call
// keep the buffer until the last of them.
// CHECK-LABEL: func.func @views_loops_and_addresses
// CHECK: %[[A:.*]] = memref.alloc() : memref<2x2xf32>
// CHECK: scf.for
// CHECK: %[[M:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT: call @consume
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: memref.dealloc %[[M]]
func.func private @consume(i64)
func.func @views_loops_and_addresses() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<2x2xf32>
  %v = memref.collapse_shape %a [[0, 1]] : memref<2x2xf32> into memref<4xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%i] : memref<4xf32>
  }
  %p = memref.extract_aligned_pointer_as_index %a : memref<2x2xf32> -> index
  %q = arith.index_cast %p : index to i64
  %marker = memref.alloc() : memref<8xf32>
  func.call @consume(%q) : (i64) -> ()
  memref.dealloc %marker : memref<8xf32>
  memref.dealloc %a : memref<2x2xf32>
  return
}

// -----

// Tests that a buffer the block's terminator passes on keeps its free where it is, and so
// does a free in another block than its allocation.
// CHECK-LABEL: func.func @escaping_buffers_stay
// CHECK: scf.if
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: scf.yield %[[A]]
// CHECK: %[[D:.*]] = memref.alloc() : memref<2xf32>
// CHECK: memref.alloc() : memref<16xf32>
// CHECK-NEXT: scf.if
// CHECK-NEXT: memref.dealloc %[[D]]
func.func @escaping_buffers_stay(%c: i1) -> memref<4xf32> {
  %c0 = arith.constant 0 : index
  %r = scf.if %c -> memref<4xf32> {
    %a = memref.alloc() : memref<4xf32>
    %x = memref.load %a[%c0] : memref<4xf32>
    %b = memref.alloc() : memref<8xf32>
    memref.dealloc %b : memref<8xf32>
    memref.dealloc %a : memref<4xf32>
    scf.yield %a : memref<4xf32>
  } else {
    %e = memref.alloc() : memref<4xf32>
    scf.yield %e : memref<4xf32>
  }
  %d = memref.alloc() : memref<2xf32>
  %y = memref.load %d[%c0] : memref<2xf32>
  %z = memref.alloc() : memref<16xf32>
  scf.if %c {
    memref.dealloc %d : memref<2xf32>
  }
  return %r : memref<4xf32>
}

// -----

// Tests that an address stored into a buffer counts as that buffer: the CUDA host code
// passes a kernel the addresses of its buffers in an array of words
// (mtc-gpu-launches-to-calls), so the temporary is freed after the launch that reads the
// array, not after the store.
// CHECK-LABEL: func.func @address_stored_for_a_launch
// CHECK: %[[T:.*]] = memref.alloc() : memref<4xf32>
// CHECK: memref.store %{{.*}}, %[[WORDS:.*]][
// CHECK: memref.extract_aligned_pointer_as_index %[[WORDS]]
// CHECK: call @launch
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NEXT: memref.alloc() : memref<8xf32>
func.func private @launch(!llvm.ptr)
func.func @address_stored_for_a_launch() {
  %c0 = arith.constant 0 : index
  %words = memref.alloca() : memref<1xi64>
  %t = memref.alloc() : memref<4xf32>
  %address = memref.extract_aligned_pointer_as_index %t : memref<4xf32> -> index
  %word = arith.index_castui %address : index to i64
  memref.store %word, %words[%c0] : memref<1xi64>
  %base = memref.extract_aligned_pointer_as_index %words : memref<1xi64> -> index
  %base64 = arith.index_castui %base : index to i64
  %pointer = llvm.inttoptr %base64 : i64 to !llvm.ptr
  func.call @launch(%pointer) : (!llvm.ptr) -> ()
  %next = memref.alloc() : memref<8xf32>
  memref.dealloc %t : memref<4xf32>
  memref.dealloc %next : memref<8xf32>
  return
}
