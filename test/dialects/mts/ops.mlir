// RUN: mt-opt %s | mt-opt | FileCheck %s
// RUN: mt-opt %s -mlir-print-op-generic | mt-opt | FileCheck %s

// Tests that every task prints in its short form and parses back: two stages, one
// micro-batch, chunk 1's backward split into B and W, chunk 0's whole.
// CHECK-LABEL: mts.schedule "zb-h1" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
// CHECK-NEXT:    mts.stage 0 {
// CHECK-NEXT:      mts.forward chunk 0 mb 0
// CHECK-NEXT:      mts.send_activation chunk 0 mb 0 to 1
// CHECK-NEXT:      mts.recv_gradient chunk 0 mb 0 from 1
// CHECK-NEXT:      mts.backward chunk 0 mb 0
// CHECK-NEXT:      mts.reduce_gradients
// CHECK-NEXT:      mts.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    mts.stage 1 {
// CHECK-NEXT:      mts.recv_activation chunk 1 mb 0 from 0
// CHECK-NEXT:      mts.forward chunk 1 mb 0
// CHECK-NEXT:      mts.backward_input chunk 1 mb 0
// CHECK-NEXT:      mts.send_gradient chunk 1 mb 0 to 0
// CHECK-NEXT:      mts.backward_weight chunk 1 mb 0
// CHECK-NEXT:      mts.reduce_gradients
// CHECK-NEXT:      mts.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
mts.schedule "zb-h1" stages 2 virtual_stages 1 micro_batches 1 chunk_stages [0, 1] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.send_activation chunk 0 mb 0 to 1
    mts.recv_gradient chunk 0 mb 0 from 1
    mts.backward chunk 0 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
  mts.stage 1 {
    mts.recv_activation chunk 1 mb 0 from 0
    mts.forward chunk 1 mb 0
    mts.backward_input chunk 1 mb 0
    mts.send_gradient chunk 1 mb 0 to 0
    mts.backward_weight chunk 1 mb 0
    mts.reduce_gradients
    mts.optimizer_step
  }
}

// Tests that consecutive chunks on one stage hand over locally: one stage with two
// chunks and two micro-batches needs no send or receive.
// CHECK-LABEL: mts.schedule "interleaved" stages 1 virtual_stages 2 micro_batches 2 chunk_stages [0, 0] {
// CHECK-NEXT:    mts.stage 0 {
// CHECK-NEXT:      mts.forward chunk 0 mb 0
// CHECK-NEXT:      mts.forward chunk 0 mb 1
// CHECK-NEXT:      mts.forward chunk 1 mb 0
// CHECK-NEXT:      mts.backward chunk 1 mb 0
// CHECK-NEXT:      mts.backward chunk 0 mb 0
// CHECK-NEXT:      mts.forward chunk 1 mb 1
// CHECK-NEXT:      mts.backward chunk 1 mb 1
// CHECK-NEXT:      mts.backward chunk 0 mb 1
// CHECK-NEXT:      mts.reduce_gradients
// CHECK-NEXT:      mts.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
mts.schedule "interleaved" stages 1 virtual_stages 2 micro_batches 2 chunk_stages [0, 0] {
  mts.stage 0 {
    mts.forward chunk 0 mb 0
    mts.forward chunk 0 mb 1
    mts.forward chunk 1 mb 0
    mts.backward chunk 1 mb 0
    mts.backward chunk 0 mb 0
    mts.forward chunk 1 mb 1
    mts.backward chunk 1 mb 1
    mts.backward chunk 0 mb 1
    mts.reduce_gradients
    mts.optimizer_step
  }
}
