// RUN: mt-opt %s -split-input-file -verify-diagnostics -mtc-gpu-launches-to-calls | FileCheck %s

// Tests that a launch becomes a call of mtc_gpu_launch with the kernel's name, its sizes as
// i64 and one i64 word per parameter (a buffer's aligned address, an index, an f32's bits
// zero-extended) in a stack array allocated at the function's entry (not in the loop), that
// the kernel module is erased, and that two launches of one kernel share its name.
// CHECK-NOT: gpu.module
// CHECK-LABEL: llvm.mlir.global internal constant @mtc_kernel_name_f_kernel_0("f_kernel_0\00")
// CHECK-LABEL: func.func private @mtc_gpu_launch(!llvm.ptr, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64)
// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[BUF:.*]]: memref<64xf32>, %[[N:.*]]: index, %[[S:.*]]: f32)
// CHECK: %[[WORDS2:.*]] = memref.alloca() : memref<3xi64>
// CHECK: %[[WORDS:.*]] = memref.alloca() : memref<3xi64>
// CHECK: scf.for
// CHECK: %[[NAME:.*]] = llvm.mlir.addressof @mtc_kernel_name_f_kernel_0
// CHECK: %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: %[[ADDR64:.*]] = arith.index_castui %[[ADDR]] : index to i64
// CHECK: memref.store %[[ADDR64]], %[[WORDS]]
// CHECK: %[[N64:.*]] = arith.index_castui %[[N]] : index to i64
// CHECK: memref.store %[[N64]], %[[WORDS]]
// CHECK: %[[BITS:.*]] = arith.bitcast %[[S]] : f32 to i32
// CHECK: %[[WORD:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK: memref.store %[[WORD]], %[[WORDS]]
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[WORDS]]
// CHECK: %[[BASE64:.*]] = arith.index_castui %[[BASE]] : index to i64
// CHECK: %[[PTR:.*]] = llvm.inttoptr %[[BASE64]] : i64 to !llvm.ptr
// CHECK: %[[COUNT:.*]] = arith.constant 3 : i64
// CHECK: call @mtc_gpu_launch(%[[NAME]], {{.*}}, %[[PTR]], %[[COUNT]])
// CHECK: llvm.mlir.addressof @mtc_kernel_name_f_kernel_0
// CHECK: memref.store {{.*}}, %[[WORDS2]]
// CHECK: call @mtc_gpu_launch(
// CHECK-NOT: gpu.launch_func
module attributes {gpu.container_module} {
  gpu.module @mtc_kernels {
    gpu.func @f_kernel_0(%a: memref<64xf32>, %n: index, %s: f32) kernel {
      gpu.return
    }
  }
  func.func @f(%buf: memref<64xf32>, %n: index, %s: f32) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    scf.for %i = %c0 to %c64 step %c1 {
      gpu.launch_func @mtc_kernels::@f_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%buf : memref<64xf32>, %n : index, %s : f32)
    }
    gpu.launch_func @mtc_kernels::@f_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%buf : memref<64xf32>, %n : index, %s : f32)
    return
  }
}

// -----

// Tests that a buffer with a non-identity layout cannot be passed to a kernel (bare pointers).
module attributes {gpu.container_module} {
  gpu.module @mtc_kernels {
    gpu.func @g_kernel_0(%a: memref<4xf32, strided<[1], offset: 4>>) kernel {
      gpu.return
    }
  }
  func.func @g(%buf: memref<4xf32, strided<[1], offset: 4>>) {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{passes a buffer with a non-identity layout to a kernel}}
    gpu.launch_func @mtc_kernels::@g_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%buf : memref<4xf32, strided<[1], offset: 4>>)
    return
  }
}
