//===- CommunicationVolume.cpp - bytes a partitioned step sends -----------===//

#include "compiler/sharding/CommunicationVolume.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mtc;

namespace {

int64_t localBytes(Type type) {
  mt::NamedTensorType local = cast<mtp::ShardedTensorType>(type).getLocalType();
  return local.getNumElements() * local.getElementType().getIntOrFloatBitWidth() / 8;
}

int64_t groupSize(Type type, StringRef axis) {
  return *cast<mtp::ShardedTensorType>(type).getMesh().getAxisSize(axis);
}

class Counter {
public:
  explicit Counter(ModuleOp module) : module(module) {}

  /// Bytes one call of `name` sends (its scans' layer functions included).
  int64_t of(StringRef name) {
    if (auto it = memo.find(name); it != memo.end())
      return it->second;
    auto func = module.lookupSymbol<func::FuncOp>(name);
    int64_t bytes = 0;
    if (func)
      func.walk([&](Operation *op) {
        if (auto r = dyn_cast<mtp::AllReduceOp>(op)) {
          // One ring all-reduce per axis, each over the then partial buffer; a maximum or
          // minimum is an all-gather and a local one (runtime/exec/MeshCollectives.h).
          bool gathers = r.getReduction() != mtp::Reduction::Sum;
          for (Attribute axis : r.getOver()) {
            int64_t n = groupSize(r.getInput().getType(), cast<StringAttr>(axis).getValue());
            int64_t local = localBytes(r.getInput().getType());
            bytes += gathers ? (n - 1) * local : 2 * (n - 1) * local / n;
          }
        } else if (auto g = dyn_cast<mtp::AllGatherOp>(op)) {
          bytes += (groupSize(g.getInput().getType(), g.getOver()) - 1) *
                   localBytes(g.getInput().getType());
        } else if (auto s = dyn_cast<mtp::ReduceScatterOp>(op)) {
          bytes += (groupSize(s.getInput().getType(), s.getOver()) - 1) *
                   localBytes(s.getResult().getType());
        } else if (auto a = dyn_cast<mtp::AllToAllOp>(op)) {
          int64_t n = groupSize(a.getInput().getType(), a.getOver());
          bytes += (n - 1) * localBytes(a.getInput().getType()) / n;
          // Filled expert slots: the counts' exchange, then at most every slot (all filled).
          if (Value filled = a.getFilled()) {
            auto counts = cast<mt::NamedTensorType>(filled.getType());
            bytes += (n - 1) * (counts.getNumElements() / n) * 8;
            upperBound = true;
          }
        } else if (auto shift = dyn_cast<mtp::ShiftOp>(op)) {
          // The local block, once; without rotating, coordinate 0 (the rank the runtime
          // reports) sends only forward (runtime/exec/MeshCollectives.h).
          if (shift.getRotate() || static_cast<int64_t>(shift.getOffset()) > 0)
            bytes += localBytes(shift.getInput().getType());
        } else if (auto repeat = dyn_cast<mt::RepeatOp>(op)) {
          bytes += repeat.getCount() * of(repeat.getCallee());
        } else if (auto call = dyn_cast<func::CallOp>(op)) {
          bytes += of(call.getCallee());
        }
      });
    memo[name] = bytes;
    return bytes;
  }

  /// Whether a count is at most what the step sends (it moves filled expert slots only).
  bool upperBound = false;

private:
  ModuleOp module;
  llvm::StringMap<int64_t> memo;
};

} // namespace

sharding::CollectiveBytes sharding::predictCollectiveBytes(ModuleOp module) {
  Counter counter(module);
  CollectiveBytes bytes{counter.of("forward_backward"), counter.of("optimizer_step"), {}};
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(mt::MTDialect::kPipelineChunkAttrName) ||
        func->hasAttr(mt::MTDialect::kPipelineStageAttrName))
      bytes.pipelineFunctions[func.getSymName().str()] = counter.of(func.getSymName());
  bytes.upperBound = counter.upperBound;
  return bytes;
}
