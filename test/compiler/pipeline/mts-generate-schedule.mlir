// RUN: mt-opt %s --mts-generate-schedule="kind=gpipe stages=2 micro-batches=2" | FileCheck %s --check-prefix=GPIPE
// RUN: mt-opt %s --mts-generate-schedule="kind=1f1b stages=3 micro-batches=2" | FileCheck %s --check-prefix=ONEFONEB
// RUN: mt-opt %s --mts-generate-schedule="kind=zb-h1 stages=3 micro-batches=3" | FileCheck %s --check-prefix=ZBH1
// RUN: mt-opt %s --mts-generate-schedule="kind=interleaved stages=2 virtual-stages=2 micro-batches=4" | FileCheck %s --check-prefix=INTERLEAVED
// RUN: mt-opt %s --mts-generate-schedule="kind=1f1b stages=4 micro-batches=8" | mt-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: not mt-opt %s --mts-generate-schedule="kind=zb-v stages=2 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not mt-opt %s --mts-generate-schedule="kind=1f1b stages=2 virtual-stages=2 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not mt-opt %s --mts-generate-schedule="kind=interleaved stages=2 virtual-stages=1 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=ONECHUNK
// RUN: not mt-opt %s --mts-generate-schedule="kind=interleaved stages=4 virtual-stages=2 micro-batches=6" 2>&1 | FileCheck %s --check-prefix=MULTIPLE
// RUN: not mt-opt %s --mts-generate-schedule="kind=gpipe stages=0 micro-batches=2" 2>&1 | FileCheck %s --check-prefix=POSITIVE

// The pass appends a schedule to this empty module; each RUN line is one case.
module {
}

// Tests that gpipe runs every forward, then every backward, each stage receiving its
// inputs right before it needs them.
// GPIPE-LABEL: mts.schedule "gpipe" stages 2 virtual_stages 1 micro_batches 2 chunk_stages [0, 1] {
// GPIPE:   mts.stage 0 {
// GPIPE-NEXT:     mts.forward chunk 0 mb 0
// GPIPE-NEXT:     mts.send_activation chunk 0 mb 0 to 1
// GPIPE-NEXT:     mts.forward chunk 0 mb 1
// GPIPE-NEXT:     mts.send_activation chunk 0 mb 1 to 1
// GPIPE-NEXT:     mts.recv_gradient chunk 0 mb 0 from 1
// GPIPE-NEXT:     mts.backward chunk 0 mb 0
// GPIPE-NEXT:     mts.recv_gradient chunk 0 mb 1 from 1
// GPIPE-NEXT:     mts.backward chunk 0 mb 1
// GPIPE-NEXT:     mts.reduce_gradients
// GPIPE-NEXT:     mts.optimizer_step
// GPIPE-NEXT:   }
// GPIPE:   mts.stage 1 {
// GPIPE-NEXT:     mts.recv_activation chunk 1 mb 0 from 0
// GPIPE-NEXT:     mts.forward chunk 1 mb 0
// GPIPE-NEXT:     mts.recv_activation chunk 1 mb 1 from 0
// GPIPE-NEXT:     mts.forward chunk 1 mb 1
// GPIPE-NEXT:     mts.backward chunk 1 mb 0
// GPIPE-NEXT:     mts.send_gradient chunk 1 mb 0 to 0
// GPIPE-NEXT:     mts.backward chunk 1 mb 1
// GPIPE-NEXT:     mts.send_gradient chunk 1 mb 1 to 0
// GPIPE-NEXT:     mts.reduce_gradients
// GPIPE-NEXT:     mts.optimizer_step
// GPIPE-NEXT:   }
// GPIPE-NEXT: }

// Tests that 1f1b warms up with P-s-1 forwards (2 on stage 0, 1 on stage 1, 0 on the
// last), then alternates forward and backward.
// ONEFONEB-LABEL: mts.schedule "1f1b" stages 3 virtual_stages 1 micro_batches 2 chunk_stages [0, 1, 2] {
// ONEFONEB:   mts.stage 0 {
// ONEFONEB-NEXT:     mts.forward chunk 0 mb 0
// ONEFONEB-NEXT:     mts.send_activation chunk 0 mb 0 to 1
// ONEFONEB-NEXT:     mts.forward chunk 0 mb 1
// ONEFONEB-NEXT:     mts.send_activation chunk 0 mb 1 to 1
// ONEFONEB-NEXT:     mts.recv_gradient chunk 0 mb 0 from 1
// ONEFONEB-NEXT:     mts.backward chunk 0 mb 0
// ONEFONEB-NEXT:     mts.recv_gradient chunk 0 mb 1 from 1
// ONEFONEB-NEXT:     mts.backward chunk 0 mb 1
// ONEFONEB-NEXT:     mts.reduce_gradients
// ONEFONEB-NEXT:     mts.optimizer_step
// ONEFONEB-NEXT:   }
// ONEFONEB:   mts.stage 1 {
// ONEFONEB-NEXT:     mts.recv_activation chunk 1 mb 0 from 0
// ONEFONEB-NEXT:     mts.forward chunk 1 mb 0
// ONEFONEB-NEXT:     mts.send_activation chunk 1 mb 0 to 2
// ONEFONEB-NEXT:     mts.recv_activation chunk 1 mb 1 from 0
// ONEFONEB-NEXT:     mts.forward chunk 1 mb 1
// ONEFONEB-NEXT:     mts.send_activation chunk 1 mb 1 to 2
// ONEFONEB-NEXT:     mts.recv_gradient chunk 1 mb 0 from 2
// ONEFONEB-NEXT:     mts.backward chunk 1 mb 0
// ONEFONEB-NEXT:     mts.send_gradient chunk 1 mb 0 to 0
// ONEFONEB-NEXT:     mts.recv_gradient chunk 1 mb 1 from 2
// ONEFONEB-NEXT:     mts.backward chunk 1 mb 1
// ONEFONEB-NEXT:     mts.send_gradient chunk 1 mb 1 to 0
// ONEFONEB-NEXT:     mts.reduce_gradients
// ONEFONEB-NEXT:     mts.optimizer_step
// ONEFONEB-NEXT:   }
// ONEFONEB:   mts.stage 2 {
// ONEFONEB-NEXT:     mts.recv_activation chunk 2 mb 0 from 1
// ONEFONEB-NEXT:     mts.forward chunk 2 mb 0
// ONEFONEB-NEXT:     mts.backward chunk 2 mb 0
// ONEFONEB-NEXT:     mts.send_gradient chunk 2 mb 0 to 1
// ONEFONEB-NEXT:     mts.recv_activation chunk 2 mb 1 from 1
// ONEFONEB-NEXT:     mts.forward chunk 2 mb 1
// ONEFONEB-NEXT:     mts.backward chunk 2 mb 1
// ONEFONEB-NEXT:     mts.send_gradient chunk 2 mb 1 to 1
// ONEFONEB-NEXT:     mts.reduce_gradients
// ONEFONEB-NEXT:     mts.optimizer_step
// ONEFONEB-NEXT:   }
// ONEFONEB-NEXT: }

// Tests that zb-h1 splits the backward and runs W of micro-batch i-s right after B of
// micro-batch i on stage s (none deferred on stage 0), the rest at the end.
// ZBH1-LABEL: mts.schedule "zb-h1" stages 3 virtual_stages 1 micro_batches 3 chunk_stages [0, 1, 2] {
// ZBH1:   mts.stage 0 {
// ZBH1-NEXT:     mts.forward chunk 0 mb 0
// ZBH1-NEXT:     mts.send_activation chunk 0 mb 0 to 1
// ZBH1-NEXT:     mts.forward chunk 0 mb 1
// ZBH1-NEXT:     mts.send_activation chunk 0 mb 1 to 1
// ZBH1-NEXT:     mts.forward chunk 0 mb 2
// ZBH1-NEXT:     mts.send_activation chunk 0 mb 2 to 1
// ZBH1-NEXT:     mts.recv_gradient chunk 0 mb 0 from 1
// ZBH1-NEXT:     mts.backward_input chunk 0 mb 0
// ZBH1-NEXT:     mts.backward_weight chunk 0 mb 0
// ZBH1-NEXT:     mts.recv_gradient chunk 0 mb 1 from 1
// ZBH1-NEXT:     mts.backward_input chunk 0 mb 1
// ZBH1-NEXT:     mts.backward_weight chunk 0 mb 1
// ZBH1-NEXT:     mts.recv_gradient chunk 0 mb 2 from 1
// ZBH1-NEXT:     mts.backward_input chunk 0 mb 2
// ZBH1-NEXT:     mts.backward_weight chunk 0 mb 2
// ZBH1-NEXT:     mts.reduce_gradients
// ZBH1-NEXT:     mts.optimizer_step
// ZBH1-NEXT:   }
// ZBH1:   mts.stage 1 {
// ZBH1-NEXT:     mts.recv_activation chunk 1 mb 0 from 0
// ZBH1-NEXT:     mts.forward chunk 1 mb 0
// ZBH1-NEXT:     mts.send_activation chunk 1 mb 0 to 2
// ZBH1-NEXT:     mts.recv_activation chunk 1 mb 1 from 0
// ZBH1-NEXT:     mts.forward chunk 1 mb 1
// ZBH1-NEXT:     mts.send_activation chunk 1 mb 1 to 2
// ZBH1-NEXT:     mts.recv_gradient chunk 1 mb 0 from 2
// ZBH1-NEXT:     mts.backward_input chunk 1 mb 0
// ZBH1-NEXT:     mts.send_gradient chunk 1 mb 0 to 0
// ZBH1-NEXT:     mts.recv_activation chunk 1 mb 2 from 0
// ZBH1-NEXT:     mts.forward chunk 1 mb 2
// ZBH1-NEXT:     mts.send_activation chunk 1 mb 2 to 2
// ZBH1-NEXT:     mts.recv_gradient chunk 1 mb 1 from 2
// ZBH1-NEXT:     mts.backward_input chunk 1 mb 1
// ZBH1-NEXT:     mts.send_gradient chunk 1 mb 1 to 0
// ZBH1-NEXT:     mts.backward_weight chunk 1 mb 0
// ZBH1-NEXT:     mts.recv_gradient chunk 1 mb 2 from 2
// ZBH1-NEXT:     mts.backward_input chunk 1 mb 2
// ZBH1-NEXT:     mts.send_gradient chunk 1 mb 2 to 0
// ZBH1-NEXT:     mts.backward_weight chunk 1 mb 1
// ZBH1-NEXT:     mts.backward_weight chunk 1 mb 2
// ZBH1-NEXT:     mts.reduce_gradients
// ZBH1-NEXT:     mts.optimizer_step
// ZBH1-NEXT:   }
// ZBH1:   mts.stage 2 {
// ZBH1-NEXT:     mts.recv_activation chunk 2 mb 0 from 1
// ZBH1-NEXT:     mts.forward chunk 2 mb 0
// ZBH1-NEXT:     mts.backward_input chunk 2 mb 0
// ZBH1-NEXT:     mts.send_gradient chunk 2 mb 0 to 1
// ZBH1-NEXT:     mts.recv_activation chunk 2 mb 1 from 1
// ZBH1-NEXT:     mts.forward chunk 2 mb 1
// ZBH1-NEXT:     mts.backward_input chunk 2 mb 1
// ZBH1-NEXT:     mts.send_gradient chunk 2 mb 1 to 1
// ZBH1-NEXT:     mts.recv_activation chunk 2 mb 2 from 1
// ZBH1-NEXT:     mts.forward chunk 2 mb 2
// ZBH1-NEXT:     mts.backward_input chunk 2 mb 2
// ZBH1-NEXT:     mts.send_gradient chunk 2 mb 2 to 1
// ZBH1-NEXT:     mts.backward_weight chunk 2 mb 0
// ZBH1-NEXT:     mts.backward_weight chunk 2 mb 1
// ZBH1-NEXT:     mts.backward_weight chunk 2 mb 2
// ZBH1-NEXT:     mts.reduce_gradients
// ZBH1-NEXT:     mts.optimizer_step
// ZBH1-NEXT:   }
// ZBH1-NEXT: }

// Tests that interleaved places chunk c on stage c % P and runs Megatron's order: P
// micro-batches per chunk, then the next chunk, backwards with the chunks reversed; stage
// 0 warms up with (P-1)*2 + (V-1)*P = 4 forwards, stage 1 with 2.
// INTERLEAVED-LABEL: mts.schedule "interleaved" stages 2 virtual_stages 2 micro_batches 4 chunk_stages [0, 1, 0, 1] {
// INTERLEAVED:   mts.stage 0 {
// INTERLEAVED-NEXT:     mts.forward chunk 0 mb 0
// INTERLEAVED-NEXT:     mts.send_activation chunk 0 mb 0 to 1
// INTERLEAVED-NEXT:     mts.forward chunk 0 mb 1
// INTERLEAVED-NEXT:     mts.send_activation chunk 0 mb 1 to 1
// INTERLEAVED-NEXT:     mts.recv_activation chunk 2 mb 0 from 1
// INTERLEAVED-NEXT:     mts.forward chunk 2 mb 0
// INTERLEAVED-NEXT:     mts.send_activation chunk 2 mb 0 to 1
// INTERLEAVED-NEXT:     mts.recv_activation chunk 2 mb 1 from 1
// INTERLEAVED-NEXT:     mts.forward chunk 2 mb 1
// INTERLEAVED-NEXT:     mts.send_activation chunk 2 mb 1 to 1
// INTERLEAVED-NEXT:     mts.forward chunk 0 mb 2
// INTERLEAVED-NEXT:     mts.send_activation chunk 0 mb 2 to 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 2 mb 0 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 2 mb 0
// INTERLEAVED-NEXT:     mts.send_gradient chunk 2 mb 0 to 1
// INTERLEAVED-NEXT:     mts.forward chunk 0 mb 3
// INTERLEAVED-NEXT:     mts.send_activation chunk 0 mb 3 to 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 2 mb 1 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 2 mb 1
// INTERLEAVED-NEXT:     mts.send_gradient chunk 2 mb 1 to 1
// INTERLEAVED-NEXT:     mts.recv_activation chunk 2 mb 2 from 1
// INTERLEAVED-NEXT:     mts.forward chunk 2 mb 2
// INTERLEAVED-NEXT:     mts.send_activation chunk 2 mb 2 to 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 0 mb 0 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 0 mb 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 2 mb 3 from 1
// INTERLEAVED-NEXT:     mts.forward chunk 2 mb 3
// INTERLEAVED-NEXT:     mts.send_activation chunk 2 mb 3 to 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 0 mb 1 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 0 mb 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 2 mb 2 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 2 mb 2
// INTERLEAVED-NEXT:     mts.send_gradient chunk 2 mb 2 to 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 2 mb 3 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 2 mb 3
// INTERLEAVED-NEXT:     mts.send_gradient chunk 2 mb 3 to 1
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 0 mb 2 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 0 mb 2
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 0 mb 3 from 1
// INTERLEAVED-NEXT:     mts.backward chunk 0 mb 3
// INTERLEAVED-NEXT:     mts.reduce_gradients
// INTERLEAVED-NEXT:     mts.optimizer_step
// INTERLEAVED-NEXT:   }
// INTERLEAVED:   mts.stage 1 {
// INTERLEAVED-NEXT:     mts.recv_activation chunk 1 mb 0 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 1 mb 0
// INTERLEAVED-NEXT:     mts.send_activation chunk 1 mb 0 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 1 mb 1 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 1 mb 1
// INTERLEAVED-NEXT:     mts.send_activation chunk 1 mb 1 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 3 mb 0 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 3 mb 0
// INTERLEAVED-NEXT:     mts.backward chunk 3 mb 0
// INTERLEAVED-NEXT:     mts.send_gradient chunk 3 mb 0 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 3 mb 1 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 3 mb 1
// INTERLEAVED-NEXT:     mts.backward chunk 3 mb 1
// INTERLEAVED-NEXT:     mts.send_gradient chunk 3 mb 1 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 1 mb 2 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 1 mb 2
// INTERLEAVED-NEXT:     mts.send_activation chunk 1 mb 2 to 0
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 1 mb 0 from 0
// INTERLEAVED-NEXT:     mts.backward chunk 1 mb 0
// INTERLEAVED-NEXT:     mts.send_gradient chunk 1 mb 0 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 1 mb 3 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 1 mb 3
// INTERLEAVED-NEXT:     mts.send_activation chunk 1 mb 3 to 0
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 1 mb 1 from 0
// INTERLEAVED-NEXT:     mts.backward chunk 1 mb 1
// INTERLEAVED-NEXT:     mts.send_gradient chunk 1 mb 1 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 3 mb 2 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 3 mb 2
// INTERLEAVED-NEXT:     mts.backward chunk 3 mb 2
// INTERLEAVED-NEXT:     mts.send_gradient chunk 3 mb 2 to 0
// INTERLEAVED-NEXT:     mts.recv_activation chunk 3 mb 3 from 0
// INTERLEAVED-NEXT:     mts.forward chunk 3 mb 3
// INTERLEAVED-NEXT:     mts.backward chunk 3 mb 3
// INTERLEAVED-NEXT:     mts.send_gradient chunk 3 mb 3 to 0
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 1 mb 2 from 0
// INTERLEAVED-NEXT:     mts.backward chunk 1 mb 2
// INTERLEAVED-NEXT:     mts.send_gradient chunk 1 mb 2 to 0
// INTERLEAVED-NEXT:     mts.recv_gradient chunk 1 mb 3 from 0
// INTERLEAVED-NEXT:     mts.backward chunk 1 mb 3
// INTERLEAVED-NEXT:     mts.send_gradient chunk 1 mb 3 to 0
// INTERLEAVED-NEXT:     mts.reduce_gradients
// INTERLEAVED-NEXT:     mts.optimizer_step
// INTERLEAVED-NEXT:   }
// INTERLEAVED-NEXT: }

// Tests that a generated schedule prints in a form that parses and verifies again.
// ROUNDTRIP-LABEL: mts.schedule "1f1b" stages 4 virtual_stages 1 micro_batches 8 chunk_stages [0, 1, 2, 3]
// ROUNDTRIP-COUNT-8: mts.backward chunk 3

// Tests that the errors name the problem.
// UNKNOWN: error: unknown schedule 'zb-v' (expected gpipe, 1f1b, interleaved or zb-h1)
// VIRTUAL: error: the 1f1b schedule runs one chunk per stage, not 2 virtual stages (use 'interleaved' for more)
// ONECHUNK: error: the interleaved schedule needs at least 2 virtual stages, not 1 (with one chunk per stage use 1f1b)
// MULTIPLE: error: the interleaved schedule needs the micro-batch count (6) to be a multiple of the stage count (4), as Megatron's interleaved schedule does
// POSITIVE: error: a pipeline schedule needs positive stages, virtual stages and micro-batches, not 0, 1 and 2
