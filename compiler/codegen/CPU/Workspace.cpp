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
  /// Inside a branch taken on a condition known only at run time: deallocations there may
  /// not happen, so they end no life.
  int64_t uncertain = 0;

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
  /// Every deallocation run so far, with the allocation ops it freed (null: none).
  llvm::MapVector<Operation *, llvm::SmallSetVector<Operation *, 2>> frees;
  /// The allocation ops whose memrefs went through an op the simulation does not model.
  llvm::SetVector<Operation *> escaped;

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
    // Integer arithmetic on known values stays known: a loop bound computed from an outer
    // loop's induction variable (fused attention's causal loops, j < i + 1) is known in
    // each iteration of the outer loop.
    if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op)) {
      auto lhs = run.constant.find(op->getOperand(0)), rhs = run.constant.find(op->getOperand(1));
      if (lhs != run.constant.end() && rhs != run.constant.end())
        run.constant[op->getResult(0)] = isa<arith::AddIOp>(op)   ? lhs->second + rhs->second
                                         : isa<arith::SubIOp>(op) ? lhs->second - rhs->second
                                                                  : lhs->second * rhs->second;
      return success();
    }
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      return allocate(alloc, run);
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      auto it = run.buffer.find(dealloc.getMemref());
      frees[op].insert(it == run.buffer.end() ? nullptr : trace[run.traceIndex[it->second]].op);
      if (it != run.buffer.end() && run.isLive[it->second] && run.uncertain == 0) {
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
    if (op->getNumRegions() == 0 || !matters(op)) {
      escape(op, run);
      return success();
    }
    if (auto loop = dyn_cast<scf::ForOp>(op))
      return runLoop(loop, run);
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      auto condition = run.constant.find(branch.getCondition());
      // Unknown conditions are ownership flags: the buffer is freed.
      bool then = condition == run.constant.end() || condition->second != 0;
      Region &region = then ? branch.getThenRegion() : branch.getElseRegion();
      if (region.empty())
        return success();
      bool uncertain = condition == run.constant.end();
      run.uncertain += uncertain;
      LogicalResult ran = runBlock(region.front(), run);
      run.uncertain -= uncertain;
      if (failed(ran))
        return failure();
      for (auto [yielded, result] :
           llvm::zip(region.front().getTerminator()->getOperands(), branch.getResults()))
        run.copy(yielded, result);
      return success();
    }
    return op->emitError("cannot predict the kernels' workspace: unexpected allocations "
                         "inside this operation");
  }

  /// `op` is not modelled: when it makes memrefs (which may then point anywhere), every
  /// allocation it or an op inside it reads escapes.
  void escape(Operation *op, Run &run) {
    if (llvm::none_of(op->getResultTypes(), llvm::IsaPred<BaseMemRefType>))
      return;
    op->walk([&](Operation *inner) {
      for (Value operand : inner->getOperands())
        if (auto it = run.buffer.find(operand); it != run.buffer.end())
          escaped.insert(trace[run.traceIndex[it->second]].op);
    });
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
    int64_t iteration = 0;
    if (auto loop = alloc->getParentOfType<scf::ForOp>())
      iteration = iterations.lookup(loop);
    trace.push_back({bytes, ++clock, std::numeric_limits<int64_t>::max(), alloc, iteration});
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
      iterations[loop] = (i - *lower) / *step;
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
  /// The iteration each loop being run is in.
  DenseMap<Operation *, int64_t> iterations;
  DenseMap<Operation *, bool> mattersMemo;
};

} // namespace

FailureOr<codegen::SimulatedCall> mtc::codegen::simulateTemporaries(ModuleOp module,
                                                                    func::FuncOp func) {
  Simulator simulator(module);
  FailureOr<int64_t> peak = simulator.peakOf(func);
  if (failed(peak))
    return failure();
  return SimulatedCall{std::move(simulator.trace), *peak, std::move(simulator.frees),
                       std::move(simulator.escaped)};
}

static int64_t roundedToWorkspaceAlignment(int64_t bytes) {
  return (bytes + codegen::kWorkspaceAlignment - 1) / codegen::kWorkspaceAlignment *
         codegen::kWorkspaceAlignment;
}

codegen::ArenaPlan mtc::codegen::planArena(ArrayRef<TracedAllocation> trace,
                                           ArrayRef<unsigned> groups) {
  ArenaPlan plan;
  plan.offsets.assign(trace.size(), 0);
  // The members of each group, in trace order (each allocation alone without groups).
  llvm::MapVector<unsigned, SmallVector<unsigned, 1>> members;
  for (unsigned index : llvm::seq<unsigned>(0, trace.size()))
    members[groups.empty() ? index : groups[index]].push_back(index);
  auto bytesOf = [&](ArrayRef<unsigned> group) {
    int64_t bytes = 0;
    for (unsigned index : group)
      bytes = std::max(bytes, trace[index].bytes);
    return roundedToWorkspaceAlignment(bytes);
  };
  // Largest first, each at the lowest aligned offset clear of every placed allocation
  // that is live at the same time as one of its group (greedy by size, as TFLite's arena
  // planner).
  SmallVector<ArrayRef<unsigned>> order;
  for (auto &entry : members)
    order.push_back(entry.second);
  llvm::stable_sort(order, [&](ArrayRef<unsigned> a, ArrayRef<unsigned> b) {
    return bytesOf(a) > bytesOf(b);
  });
  SmallVector<unsigned> placed;
  for (ArrayRef<unsigned> group : order) {
    // The placed allocations that overlap one of the group in time, by offset.
    SmallVector<unsigned> concurrent;
    for (unsigned other : placed)
      if (llvm::any_of(group, [&](unsigned index) {
            return trace[other].begin < trace[index].end && trace[index].begin < trace[other].end;
          }))
        concurrent.push_back(other);
    llvm::sort(concurrent, [&](unsigned a, unsigned b) { return plan.offsets[a] < plan.offsets[b]; });
    int64_t offset = 0, size = bytesOf(group);
    for (unsigned other : concurrent) {
      if (offset + size <= plan.offsets[other])
        break;
      offset = std::max(offset, plan.offsets[other] + roundedToWorkspaceAlignment(trace[other].bytes));
    }
    for (unsigned index : group)
      plan.offsets[index] = offset;
    plan.bytes = std::max(plan.bytes, offset + size);
    llvm::append_range(placed, group);
  }
  return plan;
}

SmallVector<func::FuncOp> mtc::codegen::workspaceEntries(ModuleOp module) {
  llvm::DenseSet<StringRef> called;
  module.walk([&](func::CallOp call) { called.insert(call.getCallee()); });
  SmallVector<func::FuncOp> entries;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal() && !called.contains(func.getSymName()))
      entries.push_back(func);
  return entries;
}

namespace {

/// How many offsets an op's blocks may take in turn (the phases of its loop) before it is
/// left to the runtime allocator: 2 covers a buffer carried into the next iteration. No
/// block is kept by every iteration of a layer scan until the scan ends, which would need
/// one phase per layer: both backends free each temporary after its last use
/// (mtc-early-deallocation), the CUDA host code's included, which has no allocator to leave
/// a block to (test/tools/mtc/target-cuda-deep.test).
constexpr int64_t kMaxPhases = 4;

/// The fewest phases (iteration modulo the result) that keep the blocks of one op that are
/// live at the same time apart, or none within kMaxPhases. `blocks` are in trace order.
std::optional<int64_t> phasesOf(ArrayRef<codegen::TracedAllocation> trace,
                                ArrayRef<unsigned> blocks) {
  for (int64_t phases = 1; phases <= kMaxPhases; ++phases) {
    // Blocks begin in trace order: those of one phase are apart when each ends before the
    // next of its phase begins.
    DenseMap<int64_t, int64_t> lastEnd;
    bool apart = llvm::all_of(blocks, [&](unsigned index) {
      int64_t phase = trace[index].iteration % phases;
      auto [it, inserted] = lastEnd.try_emplace(phase, trace[index].end);
      if (inserted)
        return true;
      if (it->second > trace[index].begin)
        return false;
      it->second = trace[index].end;
      return true;
    });
    if (apart)
      return phases;
  }
  return std::nullopt;
}

} // namespace

FailureOr<codegen::WorkspacePlan>
mtc::codegen::planKernelMemory(ModuleOp bufferizedModule, SmallVectorImpl<func::FuncOp> *unplanned) {
  // Every entry's call, one after the other on one clock.
  struct Entry {
    func::FuncOp func;
    SimulatedCall call;
    unsigned first; // its first allocation in the joint trace
  };
  SmallVector<Entry> entries;
  SmallVector<TracedAllocation> trace;
  llvm::MapVector<Operation *, llvm::SmallSetVector<Operation *, 2>> frees;
  llvm::SetVector<Operation *> escaped;
  int64_t clock = 0;
  for (func::FuncOp func : workspaceEntries(bufferizedModule)) {
    FailureOr<SimulatedCall> call = simulateTemporaries(bufferizedModule, func);
    if (failed(call)) {
      if (!unplanned)
        return failure();
      unplanned->push_back(func);
      continue;
    }
    int64_t last = clock;
    entries.push_back({func, *call, static_cast<unsigned>(trace.size())});
    for (TracedAllocation allocation : call->allocations) {
      allocation.begin += clock;
      allocation.end += clock;
      last = std::max(last, allocation.end);
      trace.push_back(allocation);
    }
    clock = last;
    for (auto &[dealloc, freed] : call->frees)
      frees[dealloc].insert(freed.begin(), freed.end());
    escaped.insert(call->escaped.begin(), call->escaped.end());
  }

  // Which ops can be placed, and in how many phases.
  llvm::MapVector<Operation *, SmallVector<unsigned>> blocksOf;
  for (auto [index, allocation] : llvm::enumerate(trace))
    blocksOf[allocation.op].push_back(index);
  DenseMap<Operation *, int64_t> phases;
  for (auto &[op, blocks] : blocksOf) {
    std::optional<int64_t> count = phasesOf(trace, blocks);
    // Phases are computed from the loop's index induction variable.
    auto loop = op->getParentOfType<scf::ForOp>();
    bool phased = count && *count > 1;
    if (count && cast<memref::AllocOp>(op).getAlignment().value_or(0) <= kWorkspaceAlignment &&
        !escaped.contains(op) && (!phased || loop.getInductionVar().getType().isIndex()))
      phases[op] = *count;
  }
  // A deallocation that may free something not placed stays, and would free a placed
  // block too: those are not placed either.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[dealloc, freed] : frees)
      if (llvm::any_of(freed, [&](Operation *op) { return !op || !phases.contains(op); }))
        for (Operation *op : freed)
          changed |= op && phases.erase(op);
  }

  SmallVector<unsigned> groups;
  DenseMap<std::pair<Operation *, int64_t>, unsigned> groupOf;
  for (auto [index, allocation] : llvm::enumerate(trace)) {
    auto it = phases.find(allocation.op);
    // Blocks of an op not placed are placed on their own.
    std::pair<Operation *, int64_t> key =
        it == phases.end() ? std::pair<Operation *, int64_t>(nullptr, index)
                           : std::pair(allocation.op, allocation.iteration % it->second);
    groups.push_back(groupOf.try_emplace(key, groupOf.size()).first->second);
  }
  ArenaPlan arena = planArena(trace, groups);

  WorkspacePlan plan;
  for (Entry &entry : entries) {
    KernelMemoryPlan &function = plan.functions.emplace_back();
    function.function = entry.func.getSymName().str();
    function.peakBytes = entry.call.peakBytes;
    for (unsigned index : llvm::seq<unsigned>(entry.first, entry.first + entry.call.allocations.size())) {
      function.sizes.push_back(trace[index].bytes);
      function.offsets.push_back(arena.offsets[index]);
      function.arenaBytes = std::max(function.arenaBytes,
                                     arena.offsets[index] + roundedToWorkspaceAlignment(trace[index].bytes));
    }
  }
  for (auto &[op, count] : phases) {
    WorkspacePlan::Placement &placement = plan.placements[op];
    ArrayRef<unsigned> blocks = blocksOf[op];
    placement.bytes = trace[blocks.front()].bytes;
    // A phase no block ran in is never run: it takes the first phase's offset.
    placement.offsets.assign(count, arena.offsets[blocks.front()]);
    for (unsigned index : blocks)
      placement.offsets[trace[index].iteration % count] = arena.offsets[index];
  }
  for (auto &[dealloc, freed] : frees)
    if (llvm::all_of(freed, [&](Operation *op) { return op && phases.contains(op); }))
      plan.freesOfPlaced.insert(dealloc);
  return plan;
}
