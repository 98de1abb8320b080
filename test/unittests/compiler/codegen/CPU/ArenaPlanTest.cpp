//===- ArenaPlanTest.cpp - tracing temporaries and packing them ------------===//
//
// simulateTemporaries on hand-written memref functions (the order and lifetimes the runtime
// will see) and planArena on traces: blocks live at the same time never share bytes.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/Workspace.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using mtc::codegen::ArenaPlan;
using mtc::codegen::TracedAllocation;

namespace {

/// Whether two allocations of `trace` at `plan`'s offsets share a byte while both live.
bool overlaps(llvm::ArrayRef<TracedAllocation> trace, const ArenaPlan &plan, size_t a,
              size_t b) {
  bool together = trace[a].begin < trace[b].end && trace[b].begin < trace[a].end;
  bool shareBytes = plan.offsets[a] < plan.offsets[b] + trace[b].bytes &&
                    plan.offsets[b] < plan.offsets[a] + trace[a].bytes;
  return together && shareBytes;
}

} // namespace

TEST(ArenaPlanTest, BlocksAtDifferentTimesShareBytes) {
  // a [1, 2), then b [3, 5) and c [4, 6) overlapping in time.
  TracedAllocation trace[] = {{1000, 1, 2}, {200, 3, 5}, {64, 4, 6}};
  ArenaPlan plan = mtc::codegen::planArena(trace);
  ASSERT_EQ(plan.offsets.size(), 3u);
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[1], 0) << "b reuses a's bytes";
  EXPECT_EQ(plan.offsets[2], 256) << "c goes after b, at a multiple of 64";
  EXPECT_EQ(plan.bytes, 1024);
}

TEST(ArenaPlanTest, RandomTracesNeverOverlap) {
  std::mt19937 random(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<TracedAllocation> trace;
    int64_t clock = 0;
    std::vector<size_t> live;
    for (int event = 0; event < 200; ++event) {
      if (!live.empty() && random() % 2) {
        size_t pick = random() % live.size();
        trace[live[pick]].end = ++clock;
        live.erase(live.begin() + static_cast<long>(pick));
      } else {
        live.push_back(trace.size());
        trace.push_back({static_cast<int64_t>(random() % 5000), ++clock, INT64_MAX});
      }
    }
    ArenaPlan plan = mtc::codegen::planArena(trace);
    int64_t livePeak = 0;
    for (int64_t t = 0; t <= clock; ++t) {
      int64_t bytes = 0;
      for (const TracedAllocation &a : trace)
        if (a.begin <= t && t < a.end)
          bytes += a.bytes;
      livePeak = std::max(livePeak, bytes);
    }
    EXPECT_GE(plan.bytes, livePeak);
    for (size_t a = 0; a < trace.size(); ++a) {
      EXPECT_EQ(plan.offsets[a] % 64, 0);
      EXPECT_LE(plan.offsets[a] + trace[a].bytes, plan.bytes);
      for (size_t b = a + 1; b < trace.size(); ++b)
        ASSERT_FALSE(overlaps(trace, plan, a, b)) << "round " << round << ": " << a << ", " << b;
    }
  }
}

TEST(ArenaPlanTest, TraceFollowsLoopsAndCalls) {
  MLIRContext context;
  context.loadDialect<arith::ArithDialect, func::FuncDialect, memref::MemRefDialect,
                      scf::SCFDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
    func.func private @callee() {
      %t = memref.alloc() : memref<8xf32>
      memref.dealloc %t : memref<8xf32>
      return
    }
    func.func @step() {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %c1 = arith.constant 1 : index
      %a = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
      scf.for %i = %c0 to %c2 step %c1 {
        func.call @callee() : () -> ()
      }
      memref.dealloc %a : memref<16xf32>
      %b = memref.alloc() : memref<4xi64>
      return
    }
  )mlir", &context);
  ASSERT_TRUE(module);
  auto step = module->lookupSymbol<func::FuncOp>("step");
  FailureOr<mtc::codegen::SimulatedCall> call = mtc::codegen::simulateTemporaries(*module, step);
  ASSERT_TRUE(succeeded(call));
  // a (128 bytes) and one callee block (32) at once.
  EXPECT_EQ(call->peakBytes, 16 * 4 + 64 + 32);
  llvm::SmallVector<TracedAllocation> *trace = &call->allocations;
  ASSERT_EQ(trace->size(), 4u) << "a, the callee's twice, b";
  EXPECT_EQ((*trace)[0].bytes, 16 * 4 + 64) << "the alignment is asked for too";
  EXPECT_EQ((*trace)[1].bytes, 32);
  EXPECT_EQ((*trace)[2].bytes, 32);
  EXPECT_EQ((*trace)[3].bytes, 32);
  EXPECT_LT((*trace)[1].end, (*trace)[2].begin) << "one iteration's block is freed first";
  EXPECT_LT((*trace)[2].end, (*trace)[0].end) << "a lives across the loop";
  EXPECT_GT((*trace)[3].begin, (*trace)[0].end);
  EXPECT_EQ((*trace)[3].end, (*trace)[3].begin + 1) << "never freed: live to the end";
}

TEST(ArenaPlanTest, AGroupSharesOneOffset) {
  // a [1, 3) and b [5, 7) of one group; c [2, 6) overlaps both in time.
  TracedAllocation trace[] = {{100, 1, 3}, {300, 2, 6}, {100, 5, 7}};
  unsigned groups[] = {0, 1, 0};
  ArenaPlan plan = mtc::codegen::planArena(trace, groups);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_EQ(plan.offsets[1], 0) << "the largest first";
  EXPECT_EQ(plan.offsets[0], 320) << "clear of c, which lives with each of the group";
  EXPECT_EQ(plan.bytes, 448);
}

namespace {

/// A module of hand-written memref functions, parsed.
struct ParsedModule {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  explicit ParsedModule(llvm::StringRef source) {
    context.loadDialect<arith::ArithDialect, func::FuncDialect, memref::MemRefDialect,
                        scf::SCFDialect>();
    module = parseSourceString<ModuleOp>(source, &context);
  }
  Operation *allocNamed(llvm::StringRef name) {
    Operation *found = nullptr;
    module->walk([&](memref::AllocOp alloc) {
      if (alloc->hasAttr(name))
        found = alloc;
    });
    return found;
  }
};

} // namespace

TEST(ArenaPlanTest, ALoopCarriedBufferTakesTwoOffsetsInTurn) {
  // %next is allocated in every iteration and frees the previous one's after it: two live
  // at once, so the iterations alternate between two offsets. %t lives inside an iteration.
  ParsedModule parsed(R"mlir(
    func.func @step() {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %false = arith.constant false
      %true = arith.constant true
      %first = memref.alloc() {first} : memref<16xf32>
      %r:2 = scf.for %i = %c0 to %c3 step %c1 iter_args(%cur = %first, %owned = %true)
          -> (memref<16xf32>, i1) {
        %t = memref.alloc() {temp} : memref<4xf32>
        memref.dealloc %t : memref<4xf32>
        %next = memref.alloc() {next} : memref<16xf32>
        scf.if %owned {
          memref.dealloc %cur : memref<16xf32>
        }
        scf.yield %next, %true : memref<16xf32>, i1
      }
      memref.dealloc %r#0 : memref<16xf32>
      return
    }
  )mlir");
  ASSERT_TRUE(parsed.module);
  FailureOr<mtc::codegen::WorkspacePlan> plan = mtc::codegen::planKernelMemory(*parsed.module);
  ASSERT_TRUE(succeeded(plan));
  ASSERT_EQ(plan->functions.size(), 1u);
  EXPECT_EQ(plan->functions[0].function, "step");
  const auto &placements = plan->placements;
  ASSERT_TRUE(placements.contains(parsed.allocNamed("next")));
  ASSERT_TRUE(placements.contains(parsed.allocNamed("temp")));
  llvm::ArrayRef<int64_t> next = placements.at(parsed.allocNamed("next")).offsets;
  ASSERT_EQ(next.size(), 2u) << "one offset per phase";
  EXPECT_NE(next[0], next[1]);
  EXPECT_EQ(placements.at(parsed.allocNamed("temp")).offsets.size(), 1u);
  EXPECT_EQ(plan->freesOfPlaced.size(), 3u) << "every dealloc frees only placed blocks";
  // The plan's list: first, then per iteration temp and next.
  EXPECT_EQ(plan->functions[0].offsets.size(), 7u);
}

TEST(ArenaPlanTest, AFreeOnAConditionKnownOnlyAtRunTimeEndsNoLife) {
  ParsedModule parsed(R"mlir(
    func.func @step(%c: i1) {
      %a = memref.alloc() {a} : memref<16xf32>
      scf.if %c {
        memref.dealloc %a : memref<16xf32>
      }
      %b = memref.alloc() {b} : memref<16xf32>
      memref.dealloc %b : memref<16xf32>
      return
    }
  )mlir");
  ASSERT_TRUE(parsed.module);
  auto step = parsed.module->lookupSymbol<func::FuncOp>("step");
  FailureOr<mtc::codegen::SimulatedCall> call = mtc::codegen::simulateTemporaries(*parsed.module, step);
  ASSERT_TRUE(succeeded(call));
  EXPECT_EQ(call->peakBytes, 128) << "a may still be live when b is allocated";
  FailureOr<mtc::codegen::WorkspacePlan> plan = mtc::codegen::planKernelMemory(*parsed.module);
  ASSERT_TRUE(succeeded(plan));
  EXPECT_NE(plan->placements.at(parsed.allocNamed("a")).offsets[0],
            plan->placements.at(parsed.allocNamed("b")).offsets[0]);
}

TEST(ArenaPlanTest, ACalleeOfTwoEntriesHasOneOffsetAndWhatCannotBePlacedStays) {
  // @layer runs under both entries; @other frees a block of unknown origin with a placed one
  // (so neither is placed), and @dynamic cannot be simulated.
  ParsedModule parsed(R"mlir(
    func.func private @layer() {
      %t = memref.alloc() {layer} : memref<32xf32>
      memref.dealloc %t : memref<32xf32>
      return
    }
    func.func @one() {
      %a = memref.alloc() {one} : memref<64xf32>
      func.call @layer() : () -> ()
      memref.dealloc %a : memref<64xf32>
      return
    }
    func.func @two(%arg: memref<8xf32>, %c: i1) {
      %b = memref.alloc() {two} : memref<8xf32>
      func.call @layer() : () -> ()
      %m = arith.select %c, %b, %arg : memref<8xf32>
      memref.dealloc %m : memref<8xf32>
      return
    }
    func.func @dynamic(%n: index) {
      %d = memref.alloc(%n) {dynamic} : memref<?xf32>
      memref.dealloc %d : memref<?xf32>
      return
    }
  )mlir");
  ASSERT_TRUE(parsed.module);
  // @dynamic's diagnostic, which the pass does not report either.
  ScopedDiagnosticHandler quiet(&parsed.context, [](Diagnostic &) { return success(); });
  llvm::SmallVector<func::FuncOp> unplanned;
  FailureOr<mtc::codegen::WorkspacePlan> plan =
      mtc::codegen::planKernelMemory(*parsed.module, &unplanned);
  ASSERT_TRUE(succeeded(plan));
  ASSERT_EQ(unplanned.size(), 1u);
  EXPECT_EQ(unplanned[0].getSymName(), "dynamic");
  ASSERT_EQ(plan->functions.size(), 2u) << "the entries: @one and @two";
  EXPECT_TRUE(plan->placements.contains(parsed.allocNamed("layer")));
  EXPECT_TRUE(plan->placements.contains(parsed.allocNamed("one")));
  EXPECT_FALSE(plan->placements.contains(parsed.allocNamed("two")))
      << "its free may free an argument too";
  EXPECT_FALSE(plan->placements.contains(parsed.allocNamed("dynamic")));
  // Without `unplanned` the entry that cannot be simulated fails the plan.
  EXPECT_TRUE(failed(mtc::codegen::planKernelMemory(*parsed.module)));
}
