// RUN: mt-opt %s | mt-opt | FileCheck %s
// RUN: mt-opt %s -mlir-print-op-generic | mt-opt | FileCheck %s
// RUN: mt-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Tests that the sharded tensor type prints its global tensor, mesh, split and partial axes
// (the last two only when present) and parses back.
// CHECK-LABEL: func.func @types
// CHECK-SAME: !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>>
// CHECK-SAME: !mtp.tensor<[batch=8, seq=64, heads=4], f32, <[dp = 2, tp = 2]>, split {batch = [dp], heads = [tp]}>
// CHECK-SAME: !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>, split {batch = [dp]}, partial [tp]>
// CHECK-SAME: !mtp.tensor<[seq=64, hidden=64], bf16, <[cp = 2, tp = 4]>, split {seq = [cp, tp]}>
func.func @types(
    %a: !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>>,
    %b: !mtp.tensor<[batch=8, seq=64, heads=4], f32, <[dp = 2, tp = 2]>,
                    split {heads = [tp], batch = [dp]}>,
    %c: !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>,
                    split {batch = [dp]}, partial [tp]>,
    %d: !mtp.tensor<[seq=64, hidden=64], bf16, <[cp = 2, tp = 4]>, split {seq = [cp, tp]}>) {
  return
}

// Tests Megatron's MLP block without sequence parallelism: the row-parallel projection's
// output is partial over tp and one all-reduce makes it whole.
// CHECK-LABEL: func.func @all_reduce
// CHECK: mtp.all_reduce %arg0 over ["tp"] : <{{.*}}partial [tp]> -> <[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>, split {batch = [dp]}>
func.func @all_reduce(%x: !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>,
                                      split {batch = [dp]}, partial [tp]>)
    -> !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>, split {batch = [dp]}> {
  %y = mtp.all_reduce %x over ["tp"]
      : !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>, split {batch = [dp]},
                    partial [tp]>
      -> !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>, split {batch = [dp]}>
  return %y : !mtp.tensor<[batch=8, seq=64, hidden=64], f32, <[dp = 2, tp = 2]>, split {batch = [dp]}>
}

// Tests sequence parallelism's pair: reduce-scatter into the seq-split norm region, then
// all-gather back before the column-parallel projection.
// CHECK-LABEL: func.func @sequence_parallel
// CHECK: %[[RS:.*]] = mtp.reduce_scatter %arg0 over "tp" along "seq"
// CHECK-SAME: -> <[seq=64, hidden=64], f32, <[tp = 4]>, split {seq = [tp]}>
// CHECK: mtp.all_gather %[[RS]] over "tp" along "seq"
// CHECK-SAME: -> <[seq=64, hidden=64], f32, <[tp = 4]>>
func.func @sequence_parallel(%x: !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>, partial [tp]>)
    -> !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>> {
  %s = mtp.reduce_scatter %x over "tp" along "seq"
      : !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>, partial [tp]>
      -> !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>, split {seq = [tp]}>
  %g = mtp.all_gather %s over "tp" along "seq"
      : !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>, split {seq = [tp]}>
      -> !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>>
  return %g : !mtp.tensor<[seq=64, hidden=64], f32, <[tp = 4]>>
}

// Tests an all-to-all that moves the split from seq to heads (Ulysses-style context
// parallelism), and the point-to-point pair of pipeline stages.
// CHECK-LABEL: func.func @all_to_all_and_p2p
// CHECK: mtp.all_to_all %arg0 over "cp" from "seq" to "heads"
// CHECK-SAME: -> <[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {heads = [cp]}>
// CHECK: mtp.send %{{.*}} over "pp" shift 1
// CHECK: mtp.recv over "pp" shift -1
func.func @all_to_all_and_p2p(%x: !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {seq = [cp]}>)
    -> !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {heads = [cp]}> {
  %y = mtp.all_to_all %x over "cp" from "seq" to "heads"
      : !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {seq = [cp]}>
      -> !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {heads = [cp]}>
  mtp.send %y over "pp" shift 1 : !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {heads = [cp]}>
  %z = mtp.recv over "pp" shift -1 : !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {heads = [cp]}>
  return %z : !mtp.tensor<[seq=64, heads=8], f32, <[pp = 2, cp = 4]>, split {heads = [cp]}>
}

// Tests the ring shift of ring attention (every rank's block one rank further around cp,
// the type unchanged) and a shift back that stops at the ends.
// CHECK-LABEL: func.func @shift
// CHECK: %[[Y:.*]] = mtp.shift %arg0 over "cp" offset 1 rotate : <[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}>
// CHECK: mtp.shift %[[Y]] over "cp" offset -2 : <[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}>
func.func @shift(%x: !mtp.tensor<[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}>)
    -> !mtp.tensor<[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}> {
  %y = mtp.shift %x over "cp" offset 1 rotate : !mtp.tensor<[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}>
  %z = mtp.shift %y over "cp" offset -2 : !mtp.tensor<[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}>
  return %z : !mtp.tensor<[seq=64, heads=8], f32, <[cp = 4]>, split {seq = [cp]}>
}

// Tests the all-to-all of expert slots that moves only the filled ones (counts per expert).
// CHECK-LABEL: func.func @all_to_all_filled
// CHECK: mtp.all_to_all %arg0 over "ep" from "capacity" to "experts" filled(%arg1 : !mt.tensor<[experts=4], i64>)
// CHECK-SAME: -> <[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
func.func @all_to_all_filled(%x: !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>,
                             %n: !mt.tensor<[experts=4], i64>)
    -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}> {
  %y = mtp.all_to_all %x over "ep" from "capacity" to "experts" filled(%n : !mt.tensor<[experts=4], i64>)
      : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {capacity = [ep]}>
      -> !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
  return %y : !mtp.tensor<[experts=4, capacity=8, hidden=2], f32, <[ep = 2]>, split {experts = [ep]}>
}

// Tests all_slice (a replicated dimension becomes split, no communication) and the casts
// between a rank's local mt tensor and its laid-out view.
// CHECK-LABEL: func.func @slice_and_local_views
// CHECK: %[[V:.*]] = mtp.from_local %arg0 : <[vocab=256, hidden=64], f32> -> <[vocab=256, hidden=64], f32, <[tp = 2]>>
// CHECK: %[[S:.*]] = mtp.all_slice %[[V]] over "tp" along "vocab"
// CHECK-SAME: -> <[vocab=256, hidden=64], f32, <[tp = 2]>, split {vocab = [tp]}>
// CHECK: mtp.to_local %[[S]] : <[vocab=256, hidden=64], f32, <[tp = 2]>, split {vocab = [tp]}> -> <[vocab=128, hidden=64], f32>
func.func @slice_and_local_views(%x: !mt.tensor<[vocab=256, hidden=64], f32>)
    -> !mt.tensor<[vocab=128, hidden=64], f32> {
  %v = mtp.from_local %x : !mt.tensor<[vocab=256, hidden=64], f32>
      -> !mtp.tensor<[vocab=256, hidden=64], f32, <[tp = 2]>>
  %s = mtp.all_slice %v over "tp" along "vocab"
      : !mtp.tensor<[vocab=256, hidden=64], f32, <[tp = 2]>>
      -> !mtp.tensor<[vocab=256, hidden=64], f32, <[tp = 2]>, split {vocab = [tp]}>
  %l = mtp.to_local %s : !mtp.tensor<[vocab=256, hidden=64], f32, <[tp = 2]>, split {vocab = [tp]}>
      -> !mt.tensor<[vocab=128, hidden=64], f32>
  return %l : !mt.tensor<[vocab=128, hidden=64], f32>
}

// Tests a max all-reduce (partial maxima of a maximum over a split dimension).
// CHECK-LABEL: func.func @max_all_reduce
// CHECK: mtp.all_reduce %arg0 over ["tp"] reduction = max : <[s=4], f32, <[tp = 2]>, partial [tp]> -> <[s=4], f32, <[tp = 2]>>
func.func @max_all_reduce(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>)
    -> !mtp.tensor<[s=4], f32, <[tp = 2]>> {
  %y = mtp.all_reduce %x over ["tp"] reduction = max : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  return %y : !mtp.tensor<[s=4], f32, <[tp = 2]>>
}

// Tests that each reduction kind round-trips, that the default sum is not printed (written
// or not), and that the kind is an enum property with the runtime's names.
// CHECK-LABEL: func.func @reduction_kinds
// CHECK: mtp.all_reduce %arg0 over ["tp"] : <[s=4], f32, <[tp = 2]>, partial [tp]>
// CHECK: mtp.all_reduce %arg0 over ["tp"] : <[s=4], f32, <[tp = 2]>, partial [tp]>
// CHECK: mtp.all_reduce %arg0 over ["tp"] reduction = min : <[s=4], f32, <[tp = 2]>, partial [tp]>
// CHECK: mtp.reduce_scatter %arg0 over "tp" along "s" reduction = max : <[s=4], f32, <[tp = 2]>, partial [tp]>
// GENERIC-LABEL: sym_name = "reduction_kinds"
// GENERIC: "mtp.all_reduce"(%{{.*}}) <{over = ["tp"], reduction = #mtp.reduction<sum>}>
// GENERIC: "mtp.all_reduce"(%{{.*}}) <{over = ["tp"], reduction = #mtp.reduction<sum>}>
// GENERIC: "mtp.all_reduce"(%{{.*}}) <{over = ["tp"], reduction = #mtp.reduction<min>}>
// GENERIC: "mtp.reduce_scatter"(%{{.*}}) <{along = "s", over = "tp", reduction = #mtp.reduction<max>}>
func.func @reduction_kinds(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>) {
  %a = mtp.all_reduce %x over ["tp"] : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  %b = mtp.all_reduce %x over ["tp"] reduction = sum : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  %c = mtp.all_reduce %x over ["tp"] reduction = min : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>>
  %d = mtp.reduce_scatter %x over "tp" along "s" reduction = max : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>
  return
}

// Tests the dialect's discardable attributes on ops of other dialects: `mtp.layout` (a
// laid-out type) and `mtp.mesh` (a mesh).
// CHECK-LABEL: func.func @layout_and_mesh
// CHECK: mt.dropout %arg0 rate 1.000000e-01 stream 0 {mtp.layout = !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>} : <[s=2], f32>
// CHECK: module attributes {mtp.mesh = #mtp.mesh<[tp = 2]>}
func.func @layout_and_mesh(%x: !mt.tensor<[s=2], f32>) -> !mt.tensor<[s=2], f32> {
  %y = mt.dropout %x rate 0.1 stream 0 {mtp.layout = !mtp.tensor<[s=4], f32, <[tp = 2]>, split {s = [tp]}>} : <[s=2], f32>
  return %y : !mt.tensor<[s=2], f32>
}
module attributes {mtp.mesh = #mtp.mesh<[tp = 2]>} {
}

// Tests to_partial (a whole value as partial sums: coordinate 0 keeps it).
// CHECK-LABEL: func.func @to_partial
// CHECK: mtp.to_partial %arg0 over "tp" : <[s=4], f32, <[tp = 2]>> -> <[s=4], f32, <[tp = 2]>, partial [tp]>
func.func @to_partial(%x: !mtp.tensor<[s=4], f32, <[tp = 2]>>)
    -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]> {
  %y = mtp.to_partial %x over "tp" : !mtp.tensor<[s=4], f32, <[tp = 2]>> -> !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
  return %y : !mtp.tensor<[s=4], f32, <[tp = 2]>, partial [tp]>
}

// Tests a two_chunk mesh axis (Megatron's causal load balancing: coordinate c of cp holds
// chunks c and 2 cp - 1 - c of what cp splits), in a mesh attribute and a laid-out type.
// CHECK-LABEL: func.func private @two_chunk
// CHECK-SAME: !mtp.tensor<[seq=16, hidden=4], f32, <[dp = 2, cp = 2 two_chunk, tp = 2]>, split {seq = [cp, tp]}>
// CHECK: module attributes {mtp.mesh = #mtp.mesh<[cp = 4 two_chunk]>}
func.func private @two_chunk(!mtp.tensor<[seq=16, hidden=4], f32, <[dp = 2, cp = 2 two_chunk, tp = 2]>, split {seq = [cp, tp]}>)
module attributes {mtp.mesh = #mtp.mesh<[cp = 4 two_chunk]>} {
}
