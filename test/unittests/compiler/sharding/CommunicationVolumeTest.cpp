//===- CommunicationVolumeTest.cpp - the bytes the compiler predicts ------===//
//
// predictCollectiveBytes counts what one rank sends as the runtime's
// communicators count it (CommunicationCounters, runtime/comm/Communicator.h):
// an all-to-all of `count` elements per block over n ranks sends the n - 1
// blocks that leave the rank, (n - 1) / n of its local buffer; a shift sends its
// local buffer once (coordinate 0 sends nothing backwards unless it rotates).
// MeshCollectivesTest checks the runtime's side of the same figures.
//
//===----------------------------------------------------------------------===//

#include "compiler/sharding/CommunicationVolume.h"
#include "compiler/registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mtc;

namespace {

// forward_backward: an f32 all-to-all over tp 4 of a [3, 5, 8] local buffer, in
// a layer run twice; optimizer_step: an f64 one over ep 2 of a [4, 2] local
// buffer.
constexpr llvm::StringLiteral kModule = R"mlir(
func.func @layer(%x: !mt.tensor<[b=3, s=5, h=8], f32>) -> !mt.tensor<[b=3, s=20, h=2], f32> {
  %p = mtp.from_local %x : !mt.tensor<[b=3, s=5, h=8], f32> -> !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {s = [tp]}>
  %a = mtp.all_to_all %p over "tp" from "s" to "h" : !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {s = [tp]}> -> !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {h = [tp]}>
  %l = mtp.to_local %a : !mtp.tensor<[b=3, s=20, h=8], f32, <[dp = 2, tp = 4]>, split {h = [tp]}> -> !mt.tensor<[b=3, s=20, h=2], f32>
  return %l : !mt.tensor<[b=3, s=20, h=2], f32>
}
func.func @forward_backward(%x: !mt.tensor<[b=3, s=5, h=8], f32>) -> !mt.tensor<[b=3, s=20, h=2], f32> {
  %y = func.call @layer(%x) : (!mt.tensor<[b=3, s=5, h=8], f32>) -> !mt.tensor<[b=3, s=20, h=2], f32>
  %z = func.call @layer(%x) : (!mt.tensor<[b=3, s=5, h=8], f32>) -> !mt.tensor<[b=3, s=20, h=2], f32>
  return %z : !mt.tensor<[b=3, s=20, h=2], f32>
}
func.func @optimizer_step(%x: !mt.tensor<[experts=4, capacity=2], f64>) -> !mt.tensor<[experts=2, capacity=4], f64> {
  %p = mtp.from_local %x : !mt.tensor<[experts=4, capacity=2], f64> -> !mtp.tensor<[experts=4, capacity=4], f64, <[ep = 2]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" : !mtp.tensor<[experts=4, capacity=4], f64, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=4], f64, <[ep = 2]>, split {experts = [ep]}>
  %l = mtp.to_local %a : !mtp.tensor<[experts=4, capacity=4], f64, <[ep = 2]>, split {experts = [ep]}> -> !mt.tensor<[experts=2, capacity=4], f64>
  return %l : !mt.tensor<[experts=2, capacity=4], f64>
}
)mlir";

/// What a communicator counts for an all-to-all of `count` elements of
/// `elementBytes` per block over `n` ranks (GlooCommunicator::doAllToAllV:
/// every block but its own).
int64_t countedAllToAll(int64_t n, int64_t count, int64_t elementBytes) {
  return (n - 1) * count * elementBytes;
}

TEST(CommunicationVolumeTest, AllToAllSendsEveryBlockButItsOwn) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);
  sharding::CollectiveBytes bytes = sharding::predictCollectiveBytes(*module);
  // 3 x 5 x 8 f32 in blocks of 30 over 4 ranks, twice; 4 x 2 f64 in blocks of 4
  // over 2.
  EXPECT_EQ(bytes.forwardBackward, 2 * countedAllToAll(4, 30, 4));
  EXPECT_EQ(bytes.forwardBackward, 720);
  EXPECT_EQ(bytes.optimizerStep, countedAllToAll(2, 4, 8));
  EXPECT_EQ(bytes.optimizerStep, 32);
  EXPECT_FALSE(bytes.upperBound);
  // The cost model's records: the kind, axis, group, the local buffer and the calls.
  ASSERT_EQ(bytes.calls["forward_backward"].size(), 1u);
  const sharding::CollectiveCall &call = bytes.calls["forward_backward"][0];
  EXPECT_EQ(call.kind, "all_to_all");
  EXPECT_EQ(call.axis, "tp");
  EXPECT_EQ(call.groupSize, 4);
  EXPECT_EQ(call.bytes, 3 * 5 * 8 * 4);
  EXPECT_EQ(call.count, 2);
  ASSERT_EQ(bytes.calls["optimizer_step"].size(), 1u);
  EXPECT_EQ(bytes.calls["optimizer_step"][0].bytes, 4 * 2 * 8);
  EXPECT_EQ(bytes.calls["optimizer_step"][0].count, 1);
}

// An all-to-all of filled expert slots sends at most the static one's bytes plus the
// exchange of the counts (the 2 counts of the other rank's experts, i64): the figure is an
// upper bound.
TEST(CommunicationVolumeTest, FilledSlotsAreAnUpperBound) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
func.func @forward_backward(%x: !mt.tensor<[experts=4, capacity=2], f32>, %n: !mt.tensor<[experts=4], i64>) -> !mt.tensor<[experts=2, capacity=4], f32> {
  %p = mtp.from_local %x : !mt.tensor<[experts=4, capacity=2], f32> -> !mtp.tensor<[experts=4, capacity=4], f32, <[ep = 2]>, split {capacity = [ep]}>
  %a = mtp.all_to_all %p over "ep" from "capacity" to "experts" filled(%n : !mt.tensor<[experts=4], i64>) : !mtp.tensor<[experts=4, capacity=4], f32, <[ep = 2]>, split {capacity = [ep]}> -> !mtp.tensor<[experts=4, capacity=4], f32, <[ep = 2]>, split {experts = [ep]}>
  %l = mtp.to_local %a : !mtp.tensor<[experts=4, capacity=4], f32, <[ep = 2]>, split {experts = [ep]}> -> !mt.tensor<[experts=2, capacity=4], f32>
  return %l : !mt.tensor<[experts=2, capacity=4], f32>
}
)mlir",
                                                                                       &context);
  ASSERT_TRUE(module);
  sharding::CollectiveBytes bytes = sharding::predictCollectiveBytes(*module);
  EXPECT_EQ(bytes.forwardBackward, countedAllToAll(2, 4, 4) + countedAllToAll(2, 2, 8));
  EXPECT_TRUE(bytes.upperBound);
  // The slots (4 x 2 f32) and the counts (2 i64 per rank, 32 bytes over both) are equal
  // records: one, twice.
  ASSERT_EQ(bytes.calls["forward_backward"].size(), 1u);
  EXPECT_EQ(bytes.calls["forward_backward"][0].bytes, 32);
  EXPECT_EQ(bytes.calls["forward_backward"][0].count, 2);
}

// Ring attention's shifts in a layer run 3 times: a rotating one of a [2, 4] f32
// block, a rotating one back, and one that does not rotate, backwards: coordinate 0
// (whose figures mtrun reports) has no rank before it to send to.
constexpr llvm::StringLiteral kShifts = R"mlir(
func.func @layer(%x: !mt.tensor<[s=2, h=4], f32>) -> !mt.tensor<[s=2, h=4], f32> attributes {mt.layer} {
  %p = mtp.from_local %x : !mt.tensor<[s=2, h=4], f32> -> !mtp.tensor<[s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}>
  %a = mtp.shift %p over "cp" offset 1 rotate : !mtp.tensor<[s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}>
  %b = mtp.shift %a over "cp" offset -1 rotate : !mtp.tensor<[s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}>
  %c = mtp.shift %b over "cp" offset -1 : !mtp.tensor<[s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}>
  %l = mtp.to_local %c : !mtp.tensor<[s=8, h=4], f32, <[cp = 4]>, split {s = [cp]}> -> !mt.tensor<[s=2, h=4], f32>
  return %l : !mt.tensor<[s=2, h=4], f32>
}
func.func @forward_backward(%x: !mt.tensor<[s=2, h=4], f32>) -> !mt.tensor<[s=2, h=4], f32> {
  %y = mt.repeat @layer(%x) count 3 {carried = 1 : i64} : (!mt.tensor<[s=2, h=4], f32>) -> !mt.tensor<[s=2, h=4], f32>
  return %y : !mt.tensor<[s=2, h=4], f32>
}
)mlir";

TEST(CommunicationVolumeTest, ShiftSendsTheLocalBlockOnce) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kShifts, &context);
  ASSERT_TRUE(module);
  sharding::CollectiveBytes bytes = sharding::predictCollectiveBytes(*module);
  EXPECT_EQ(bytes.forwardBackward, 3 * 2 * (2 * 4 * 4));
  EXPECT_EQ(bytes.optimizerStep, 0);
  // The two rotating shifts of each of the 3 layers; the backward one of coordinate 0 sends
  // nothing.
  ASSERT_EQ(bytes.calls["forward_backward"].size(), 1u);
  const sharding::CollectiveCall &call = bytes.calls["forward_backward"][0];
  EXPECT_EQ(call.kind, "shift");
  EXPECT_EQ(call.groupSize, 4);
  EXPECT_EQ(call.bytes, 2 * 4 * 4);
  EXPECT_EQ(call.count, 6);
}

} // namespace
