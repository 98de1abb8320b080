// REQUIRES: ptxas
// RUN: mtc-codegen %s --target=sm_90 -o %t.sm_90.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,SM90 --implicit-check-not=.extern --input-file=%t.sm_90.ptx
// RUN: %ptxas -arch=sm_90 %t.sm_90.ptx -o %t.sm_90.cubin
// RUN: mtc-codegen %s --target=sm_80 -o %t.sm_80.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,SM80 --implicit-check-not=.extern --input-file=%t.sm_80.ptx
// RUN: %ptxas -arch=sm_80 %t.sm_80.ptx -o %t.sm_80.cubin

// Tests that a fused MLP step, gelu(x w + b), and a full reduction compile to PTX that
// ptxas assembles for sm_90 and sm_80: one entry per linalg op after elementwise fusion,
// buffers as bare pointers, the block size as .maxntid, and libdevice's erf linked in (no
// external calls left).

// CHECK: .version 8.0
// SM90: .target sm_90
// SM80: .target sm_80

// The zero fill of the contraction's accumulator: 2*4*16 = 128 threads.
// CHECK-LABEL: .visible .entry mlp_kernel_0(
// CHECK-NEXT: .param .u64 .ptr .align 1 mlp_kernel_0_param_0
// CHECK-NEXT: )
// CHECK-NEXT: .maxntid 128, 1, 1
// The contraction, then the bias and gelu fused into one kernel:
// CHECK-LABEL: .visible .entry mlp_kernel_1(
// CHECK-LABEL: .visible .entry mlp_kernel_2(
// CHECK-NOT: .entry mlp
// CHECK: ret;
func.func @mlp(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
               %w: !mt.tensor<[hidden=8, ffn=16], f32>, %b: !mt.tensor<[ffn=16], f32>)
    -> !mt.tensor<[batch=2, seq=4, ffn=16], f32> {
  %xw = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
      !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[batch=2, seq=4, ffn=16], f32>
  %h = mt.add %xw, %b : !mt.tensor<[batch=2, seq=4, ffn=16], f32>,
      !mt.tensor<[ffn=16], f32> -> !mt.tensor<[batch=2, seq=4, ffn=16], f32>
  %g = mt.gelu %h : !mt.tensor<[batch=2, seq=4, ffn=16], f32>
  return %g : !mt.tensor<[batch=2, seq=4, ffn=16], f32>
}

// A full reduction has no parallel dimension: a one-thread kernel after its fill; the exp
// is fused into it (4000 bytes: the loop over the 1000 elements).
// CHECK-LABEL: .visible .entry total_kernel_0(
// CHECK: .maxntid 1, 1, 1
// CHECK-LABEL: .visible .entry total_kernel_1(
// CHECK: .maxntid 1, 1, 1
// CHECK: setp.{{.*}} 4000;
// CHECK-NOT: .entry
func.func @total(%x: !mt.tensor<[n=1000], f32>) -> !mt.tensor<[], f32> {
  %e = mt.exp %x : !mt.tensor<[n=1000], f32>
  %s = mt.reduce_sum %e over [n] : !mt.tensor<[n=1000], f32> -> !mt.tensor<[], f32>
  return %s : !mt.tensor<[], f32>
}
