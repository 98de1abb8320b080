// Collectives as the compiler lowers them (mtp ops through mtc-codegen's mt-to-linalg and
// CPU pipelines), which LoweredCollectivesTest.cpp runs on ranks over loopback. The values
// of every whole tensor are known to the test (100 * first index + 10 * second + third).

// tp moves from s to h (both inner dimensions, from before to) over 2 ranks.
func.func @all_to_all_s_to_h(%x: !mt.tensor<[b=3, s=2, h=4], f32>) -> !mt.tensor<[b=3, s=4, h=2], f32> {
  %p = mtp.from_local %x : !mt.tensor<[b=3, s=2, h=4], f32> -> !mtp.tensor<[b=3, s=4, h=4], f32, <[tp = 2]>, split {s = [tp]}>
  %a = mtp.all_to_all %p over "tp" from "s" to "h" : !mtp.tensor<[b=3, s=4, h=4], f32, <[tp = 2]>, split {s = [tp]}> -> !mtp.tensor<[b=3, s=4, h=4], f32, <[tp = 2]>, split {h = [tp]}>
  %l = mtp.to_local %a : !mtp.tensor<[b=3, s=4, h=4], f32, <[tp = 2]>, split {h = [tp]}> -> !mt.tensor<[b=3, s=4, h=2], f32>
  return %l : !mt.tensor<[b=3, s=4, h=2], f32>
}

// An expert dispatch over 4 ranks: ep moves from the capacity to the (outermost) experts.
func.func @all_to_all_capacity_to_experts(%x: !mt.tensor<[experts=4, capacity=3, hidden=2], f32>) -> !mt.tensor<[experts=1, capacity=12, hidden=2], f32> {
  %p = mtp.from_local %x : !mt.tensor<[experts=4, capacity=3, hidden=2], f32> -> !mtp.tensor<[experts=4, capacity=12, hidden=2], f32, <[ep = 4]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" : !mtp.tensor<[experts=4, capacity=12, hidden=2], f32, <[ep = 4]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=12, hidden=2], f32, <[ep = 4]>, split {experts = [ep]}>
  %l = mtp.to_local %a : !mtp.tensor<[experts=4, capacity=12, hidden=2], f32, <[ep = 4]>, split {experts = [ep]}> -> !mt.tensor<[experts=1, capacity=12, hidden=2], f32>
  return %l : !mt.tensor<[experts=1, capacity=12, hidden=2], f32>
}

// Ring attention's exchange: every rank's part of s one rank further around cp (4 ranks).
func.func @shift_around_cp(%x: !mt.tensor<[b=3, s=2, h=4], f32>) -> !mt.tensor<[b=3, s=2, h=4], f32> {
  %p = mtp.from_local %x : !mt.tensor<[b=3, s=2, h=4], f32> -> !mtp.tensor<[b=3, s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}>
  %y = mtp.shift %p over "cp" offset 1 rotate : !mtp.tensor<[b=3, s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}>
  %l = mtp.to_local %y : !mtp.tensor<[b=3, s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}> -> !mt.tensor<[b=3, s=2, h=4], f32>
  return %l : !mt.tensor<[b=3, s=2, h=4], f32>
}
