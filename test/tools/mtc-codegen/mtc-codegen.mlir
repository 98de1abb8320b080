// RUN: mtc-codegen %s --emit=linalg | FileCheck %s --check-prefix=LINALG
// RUN: mtc-codegen %s --target=x86 -o %t.so
// RUN: llvm-nm -D --defined-only %t.so | FileCheck %s --check-prefix=SO
// RUN: mtc-codegen %s --target=sm_90 | FileCheck %s --check-prefix=PTX
// RUN: not mtc-codegen %s --target=sm_9x 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not mtc-codegen %s --target=x86 2>&1 | FileCheck %s --check-prefix=NOOUT

// Tests the mtc-codegen driver: mtc-to-linalg-pipeline then either backend. Only arithmetic, so the
// PTX needs no libdevice and this test runs without a CUDA toolkit.

// LINALG-LABEL: func.func @scale
// LINALG-SAME: (%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8xf32>) -> tensor<4x8xf32>
// LINALG: linalg.generic

// SO-DAG: T _mlir_ciface_scale
// SO-DAG: T _mtc_packed_scale
// SO-DAG: R mtc_kernel_context_version

// PTX: .target sm_90
// PTX: .visible .entry scale_kernel_0(
// PTX-NEXT: .param .u64 .ptr .align 1 scale_kernel_0_param_0,
// PTX-NEXT: .param .u64 .ptr .align 1 scale_kernel_0_param_1,
// PTX-NEXT: .param .u64 .ptr .align 1 scale_kernel_0_param_2
// PTX-NEXT: )
// PTX-NEXT: .maxntid 32, 1, 1

// ARCH: error: unknown CUDA architecture 'sm_9x'
// NOOUT: error: --target=x86 writes a shared object: give its path with -o
func.func @scale(%x: !mt.tensor<[seq=4, hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>)
    -> !mt.tensor<[seq=4, hidden=8], f32> {
  %0 = mt.mul %x, %g : !mt.tensor<[seq=4, hidden=8], f32>, !mt.tensor<[hidden=8], f32>
      -> !mt.tensor<[seq=4, hidden=8], f32>
  return %0 : !mt.tensor<[seq=4, hidden=8], f32>
}
