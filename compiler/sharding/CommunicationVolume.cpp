//===- CommunicationVolume.cpp - bytes a partitioned step sends -----------===//

#include "compiler/sharding/CommunicationVolume.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mtc;

namespace {

int64_t localBytes(Type type) {
  return mt::getSizeInBytes(cast<mtp::ShardedTensorType>(type).getLocalType());
}

bool batched(Type type) {
  return cast<mtp::ShardedTensorType>(type).getLocalType().hasDim("batch");
}

int64_t groupSize(Type type, StringRef axis) {
  return *cast<mtp::ShardedTensorType>(type).getMesh().getAxisSize(axis);
}

/// What one call of a function sends, and its collectives.
struct FunctionCollectives {
  int64_t bytes = 0;
  std::vector<sharding::CollectiveCall> calls;

  /// Adds `count` calls of a collective that sends `sent` bytes each.
  void add(sharding::CollectiveCall call, int64_t sent, int64_t count = 1) {
    bytes += count * sent;
    call.count = count;
    merge(call);
  }
  /// Adds `count` calls of a function.
  void addCalls(const FunctionCollectives &callee, int64_t count) {
    bytes += count * callee.bytes;
    for (sharding::CollectiveCall call : callee.calls) {
      call.count *= count;
      merge(call);
    }
  }

private:
  void merge(const sharding::CollectiveCall &call) {
    for (sharding::CollectiveCall &known : calls)
      if (known.kind == call.kind && known.axis == call.axis && known.groupSize == call.groupSize &&
          known.bytes == call.bytes && known.batched == call.batched) {
        known.count += call.count;
        return;
      }
    calls.push_back(call);
  }
};

class Counter {
public:
  explicit Counter(ModuleOp module) : module(module) {}

  /// What one call of `name` sends (its scans' layer functions included).
  const FunctionCollectives &of(StringRef name) {
    if (auto it = memo.find(name); it != memo.end())
      return it->second;
    auto func = module.lookupSymbol<func::FuncOp>(name);
    FunctionCollectives result;
    if (func)
      addWalk(result, func);
    return memo[name] = std::move(result);
  }

  /// Adds the collectives of `root` and the ops nested in it.
  void addWalk(FunctionCollectives &result, Operation *root) {
    bool batch = false;
    auto call = [&](StringRef kind, StringRef axis, int64_t n, int64_t bytes) {
      return sharding::CollectiveCall{kind.str(), axis.str(), n, bytes, 0, batch};
    };
    root->walk([&](Operation *op) {
      batch = op->getNumOperands() > 0 &&
              isa<mtp::ShardedTensorType>(op->getOperand(0).getType()) &&
              batched(op->getOperand(0).getType());
      if (auto r = dyn_cast<mtp::AllReduceOp>(op)) {
        // One ring all-reduce per axis, each over the then partial buffer; a maximum or
        // minimum is an all-gather and a local one (runtime/exec/MeshCollectives.h).
        bool gathers = r.getReduction() != mtp::Reduction::Sum;
        for (Attribute axisAttr : r.getOver()) {
          StringRef axis = cast<StringAttr>(axisAttr).getValue();
          int64_t n = groupSize(r.getInput().getType(), axis);
          int64_t local = localBytes(r.getInput().getType());
          if (gathers)
            result.add(call("all_gather", axis, n, local), (n - 1) * local);
          else
            result.add(call("all_reduce", axis, n, local), 2 * (n - 1) * local / n);
        }
      } else if (auto g = dyn_cast<mtp::AllGatherOp>(op)) {
        int64_t n = groupSize(g.getInput().getType(), g.getOver());
        int64_t local = localBytes(g.getInput().getType());
        result.add(call("all_gather", g.getOver(), n, local), (n - 1) * local);
      } else if (auto s = dyn_cast<mtp::ReduceScatterOp>(op)) {
        int64_t n = groupSize(s.getInput().getType(), s.getOver());
        result.add(call("reduce_scatter", s.getOver(), n, localBytes(s.getInput().getType())),
                   (n - 1) * localBytes(s.getResult().getType()));
      } else if (auto a = dyn_cast<mtp::AllToAllOp>(op)) {
        int64_t n = groupSize(a.getInput().getType(), a.getOver());
        int64_t local = localBytes(a.getInput().getType());
        result.add(call("all_to_all", a.getOver(), n, local), (n - 1) * local / n);
        // Filled expert slots: the counts' exchange, then at most every slot (all filled).
        if (Value filled = a.getFilled()) {
          auto counts = cast<mt::NamedTensorType>(filled.getType());
          int64_t countBytes = (counts.getNumElements() / n) * 8;
          batch = false; // one count per expert, whatever the micro-batch
          result.add(call("all_to_all", a.getOver(), n, countBytes * n), (n - 1) * countBytes);
          upperBound = true;
        }
      } else if (auto shift = dyn_cast<mtp::ShiftOp>(op)) {
        // The local block, once; without rotating, coordinate 0 (the rank the runtime
        // reports) sends only forward (runtime/exec/MeshCollectives.h).
        if (shift.getRotate() || static_cast<int64_t>(shift.getOffset()) > 0) {
          int64_t local = localBytes(shift.getInput().getType());
          result.add(call("shift", shift.getOver(),
                          groupSize(shift.getInput().getType(), shift.getOver()), local),
                     local);
        }
      } else if (auto repeat = dyn_cast<mt::RepeatOp>(op)) {
        result.addCalls(of(repeat.getCallee()), repeat.getCount());
      } else if (auto callOp = dyn_cast<func::CallOp>(op)) {
        result.addCalls(of(callOp.getCallee()), 1);
      }
    });
  }

  /// Whether a count is at most what the step sends (it moves filled expert slots only).
  bool upperBound = false;

private:
  ModuleOp module;
  llvm::StringMap<FunctionCollectives> memo;
};

} // namespace

sharding::CollectiveBytes sharding::predictCollectiveBytes(ModuleOp module) {
  Counter counter(module);
  CollectiveBytes bytes;
  auto record = [&](StringRef name) {
    const FunctionCollectives &function = counter.of(name);
    bytes.calls[name.str()] = function.calls;
    return function.bytes;
  };
  bytes.forwardBackward = record("forward_backward");
  bytes.optimizerStep = record("optimizer_step");
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(mt::MTDialect::kPipelineChunkAttrName) ||
        func->hasAttr(mt::MTDialect::kPipelineStageAttrName))
      bytes.pipelineFunctions[func.getSymName().str()] = record(func.getSymName());
  bytes.upperBound = counter.upperBound;
  return bytes;
}

std::vector<sharding::CollectiveCall> sharding::predictFunctionCollectives(ModuleOp module,
                                                                           StringRef name) {
  Counter counter(module);
  return counter.of(name).calls;
}

std::vector<sharding::CollectiveCall> sharding::predictOpCollectives(ModuleOp module,
                                                                     Operation *op) {
  Counter counter(module);
  FunctionCollectives result;
  counter.addWalk(result, op);
  return result.calls;
}
