//===- Workspace.cpp - the kernels' temporaries, simulated and planned ---===//

#include "compiler/codegen/CPU/Workspace.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <limits>

using namespace mlir;
using namespace mtc;

namespace {

/// Bytes of one element as finalize-memref-to-llvm sizes it.
std::optional<int64_t> elementBytes(Type type) {
  if (type.isIndex())
    return 8;
  if (type.isIntOrFloat())
    return (type.getIntOrFloatBitWidth() + 7) / 8;
  return std::nullopt;
}

/// One abstract call of a function: which allocation every memref value points into, the
/// constant integers (loop bounds, ownership flags) and the allocations still live.
struct Run {
  DenseMap<Value, unsigned> buffer;
  DenseMap<Value, int64_t> constant;
  SmallVector<int64_t> sizes;  // per allocation
  SmallVector<bool> isLive;    // per allocation
  int64_t live = 0, peak = 0;
  SmallVector<unsigned> traceIndex; // per allocation: its place in the simulator's trace

  /// Makes `to` point where `from` does (or nowhere) and hold its constant (or none).
  void copy(Value from, Value to) {
    if (auto it = buffer.find(from); it != buffer.end())
      buffer[to] = it->second;
    else
      buffer.erase(to);
    if (auto it = constant.find(from); it != constant.end())
      constant[to] = it->second;
    else
      constant.erase(to);
  }
};

class Simulator {
public:
  explicit Simulator(ModuleOp module) : symbols(module) {}

  /// Every allocation made so far, in order, callees' included, with the clock ticks of
  /// its allocation and deallocation (the end of its call when it is never freed).
  SmallVector<codegen::TracedAllocation> trace;

  /// Simulates one call of `func` (callees at every call), appending to `trace`; returns
  /// the call's peak.
  FailureOr<int64_t> peakOf(func::FuncOp func) {
    Run run;
    if (failed(runBlock(func.getBody().front(), run)))
      return failure();
    for (auto [index, live] : llvm::enumerate(run.isLive))
      if (live)
        trace[run.traceIndex[index]].end = ++clock;
    return run.peak;
  }

private:
  /// Whether `op` allocates, frees or calls a function with a body, itself or inside.
  bool matters(Operation *op) {
    if (auto it = mattersMemo.find(op); it != mattersMemo.end())
      return it->second;
    WalkResult walk = op->walk([&](Operation *inner) {
      if (isa<memref::AllocOp, memref::DeallocOp>(inner))
        return WalkResult::interrupt();
      if (auto call = dyn_cast<func::CallOp>(inner))
        if (auto callee = symbols.lookup<func::FuncOp>(call.getCallee()); callee && !callee.isExternal())
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return mattersMemo[op] = walk.wasInterrupted();
  }

  LogicalResult runBlock(Block &block, Run &run) {
    for (Operation &op : block)
      if (failed(runOp(&op, run)))
        return failure();
    return success();
  }

  LogicalResult runOp(Operation *op, Run &run) {
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (auto value = dyn_cast<IntegerAttr>(constant.getValue()))
        run.constant[constant.getResult()] = value.getInt();
      return success();
    }
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      return allocate(alloc, run);
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      auto it = run.buffer.find(dealloc.getMemref());
      if (it != run.buffer.end() && run.isLive[it->second]) {
        run.isLive[it->second] = false;
        run.live -= run.sizes[it->second];
        trace[run.traceIndex[it->second]].end = ++clock;
      }
      return success();
    }
    if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(op)) {
      run.copy(metadata.getSource(), metadata.getBaseBuffer());
      return success();
    }
    if (auto view = dyn_cast<ViewLikeOpInterface>(op)) {
      for (Value result : op->getResults())
        run.copy(view.getViewSource(), result);
      return success();
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal())
        return success();
      FailureOr<int64_t> calleePeak = peakOf(callee);
      if (failed(calleePeak))
        return failure();
      run.peak = std::max(run.peak, run.live + *calleePeak);
      return success();
    }
    if (op->getNumRegions() == 0 || !matters(op))
      return success();
    if (auto loop = dyn_cast<scf::ForOp>(op))
      return runLoop(loop, run);
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      auto condition = run.constant.find(branch.getCondition());
      // Unknown conditions are ownership flags: the buffer is freed.
      bool then = condition == run.constant.end() || condition->second != 0;
      Region &region = then ? branch.getThenRegion() : branch.getElseRegion();
      if (region.empty())
        return success();
      if (failed(runBlock(region.front(), run)))
        return failure();
      for (auto [yielded, result] :
           llvm::zip(region.front().getTerminator()->getOperands(), branch.getResults()))
        run.copy(yielded, result);
      return success();
    }
    return op->emitError("cannot predict the kernels' workspace: unexpected allocations "
                         "inside this operation");
  }

  LogicalResult allocate(memref::AllocOp alloc, Run &run) {
    MemRefType type = alloc.getType();
    std::optional<int64_t> element = elementBytes(type.getElementType());
    if (!type.hasStaticShape() || !element)
      return alloc.emitError("cannot predict the kernels' workspace: allocation of ")
             << type << " has no size known at compile time";
    int64_t bytes = type.getNumElements() * *element + alloc.getAlignment().value_or(0);
    run.buffer[alloc.getResult()] = run.sizes.size();
    run.sizes.push_back(bytes);
    run.isLive.push_back(true);
    run.traceIndex.push_back(trace.size());
    trace.push_back({bytes, ++clock, std::numeric_limits<int64_t>::max()});
    run.live += bytes;
    run.peak = std::max(run.peak, run.live);
    return success();
  }

  LogicalResult runLoop(scf::ForOp loop, Run &run) {
    auto bound = [&](Value value) -> std::optional<int64_t> {
      if (auto it = run.constant.find(value); it != run.constant.end())
        return it->second;
      return std::nullopt;
    };
    std::optional<int64_t> lower = bound(loop.getLowerBound()), upper = bound(loop.getUpperBound()),
                           step = bound(loop.getStep());
    if (!lower || !upper || !step || *step <= 0)
      return loop.emitError("cannot predict the kernels' workspace: a loop that allocates "
                            "has bounds not known at compile time");
    Block &body = *loop.getBody();
    for (auto [init, arg] : llvm::zip(loop.getInitArgs(), loop.getRegionIterArgs()))
      run.copy(init, arg);
    for (int64_t i = *lower; i < *upper; i += *step) {
      run.constant[loop.getInductionVar()] = i;
      if (failed(runBlock(body, run)))
        return failure();
      // Through fresh values: a body may yield its own iteration arguments, swapped.
      SmallVector<Value> carried = llvm::to_vector(body.getTerminator()->getOperands());
      for (auto [yielded, result] : llvm::zip(carried, loop.getResults()))
        run.copy(yielded, result);
      for (auto [result, arg] : llvm::zip(loop.getResults(), loop.getRegionIterArgs()))
        run.copy(result, arg);
    }
    // Without iterations the results are the initial values.
    if (*lower >= *upper)
      for (auto [init, result] : llvm::zip(loop.getInitArgs(), loop.getResults()))
        run.copy(init, result);
    return success();
  }

  SymbolTable symbols;
  int64_t clock = 0;
  DenseMap<Operation *, bool> mattersMemo;
};

} // namespace

FailureOr<codegen::SimulatedCall> mtc::codegen::simulateTemporaries(ModuleOp module,
                                                                    func::FuncOp func) {
  Simulator simulator(module);
  FailureOr<int64_t> peak = simulator.peakOf(func);
  if (failed(peak))
    return failure();
  return SimulatedCall{std::move(simulator.trace), *peak};
}

codegen::ArenaPlan mtc::codegen::planArena(ArrayRef<TracedAllocation> trace) {
  // The plan format's arena alignment (kKernelArenaAlignment, runtime/plan/Plan.h).
  constexpr int64_t kAlignment = 64;
  ArenaPlan plan;
  plan.offsets.assign(trace.size(), 0);
  // Largest first, each at the lowest aligned offset clear of every placed allocation
  // that is live at the same time (greedy by size, as TFLite's arena planner).
  SmallVector<unsigned> order = llvm::to_vector(llvm::seq<unsigned>(0, trace.size()));
  llvm::stable_sort(order, [&](unsigned a, unsigned b) { return trace[a].bytes > trace[b].bytes; });
  auto rounded = [&](int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; };
  SmallVector<unsigned> placed;
  for (unsigned index : order) {
    const TracedAllocation &allocation = trace[index];
    // The placed allocations that overlap in time, by offset.
    SmallVector<unsigned> concurrent;
    for (unsigned other : placed)
      if (trace[other].begin < allocation.end && allocation.begin < trace[other].end)
        concurrent.push_back(other);
    llvm::sort(concurrent, [&](unsigned a, unsigned b) { return plan.offsets[a] < plan.offsets[b]; });
    int64_t offset = 0, size = rounded(allocation.bytes);
    for (unsigned other : concurrent) {
      if (offset + size <= plan.offsets[other])
        break;
      offset = std::max(offset, plan.offsets[other] + rounded(trace[other].bytes));
    }
    plan.offsets[index] = offset;
    plan.bytes = std::max(plan.bytes, offset + size);
    placed.push_back(index);
  }
  return plan;
}
