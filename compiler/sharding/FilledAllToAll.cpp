//===- FilledAllToAll.cpp - all-to-all-v of dropless expert slots ---------===//
//
// After partitioning, the slots of dropless routing travel between the ranks routing the
// tokens and the ranks holding the experts by the all-to-alls the partitioner derived
// (capacity <-> experts). Those move every slot; the counts of filled ones let the runtime
// move only those. Passes.td describes the conditions.
//
//===----------------------------------------------------------------------===//

#include "compiler/sharding/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mtc::sharding {
#define GEN_PASS_DEF_MTPFILLEDALLTOALLPASS
#include "compiler/sharding/Passes.h.inc"
} // namespace mtc::sharding

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;

namespace {

/// A routing op of the function, on local types.
struct Routing {
  StringRef expertDim, capacityDim, kDim;
  Value indices;
  /// The local tensor holding the slots (dispatch's result, combine's input).
  NamedTensorType slots;

  /// Every expert can take every token of this rank.
  bool dropless() const {
    auto indicesType = cast<NamedTensorType>(indices.getType());
    return slots.getDimSize(capacityDim) ==
           indicesType.getNumElements() / indicesType.getDimSize(kDim);
  }
};

std::optional<Routing> routingOf(Operation *op) {
  auto make = [](auto routing, Value slots) {
    return Routing{routing.getExpertDim(), routing.getCapacityDim(), routing.getKDim(),
                   routing.getIndices(), cast<NamedTensorType>(slots.getType())};
  };
  if (auto dispatch = dyn_cast<mt::DispatchOp>(op))
    return make(dispatch, dispatch.getResult());
  if (auto combine = dyn_cast<mt::CombineOp>(op))
    return make(combine, combine.getInput());
  if (auto grad = dyn_cast<mt::CombineGradOp>(op))
    return make(grad, grad.getInput());
  return std::nullopt;
}

/// The function's routing between `a` and `b` (expert and slot dimension either way
/// round), when every routing op between them routes by the same indices and is dropless.
const Routing *droplessRouting(ArrayRef<Routing> routings, StringRef a, StringRef b) {
  const Routing *found = nullptr;
  for (const Routing &r : routings) {
    bool between = (r.expertDim == a && r.capacityDim == b) ||
                   (r.expertDim == b && r.capacityDim == a);
    if (!between)
      continue;
    if (!r.dropless() || (found && found->indices != r.indices))
      return nullptr;
    found = &r;
  }
  return found;
}

/// Whether `op` moves slots as the runtime's all-to-all of filled slots can: the two
/// dimensions lead, the slot dimension is split over the moved axis alone on the routing
/// side, whose expert dimension is whole.
bool movesWholeExpertSlots(mtp::AllToAllOp op, StringRef experts) {
  auto in = cast<mtp::ShardedTensorType>(op.getInput().getType());
  auto out = cast<mtp::ShardedTensorType>(op.getResult().getType());
  bool toExperts = op.getTo() == experts;
  mtp::ShardedTensorType routingSide = toExperts ? in : out;
  StringRef slots = toExperts ? op.getFrom() : op.getTo();
  SmallVector<mt::NamedDim> dims = in.getGlobal().getDims();
  auto leads = [&](StringRef name) {
    return dims.size() >= 2 && (dims[0].name.getValue() == name || dims[1].name.getValue() == name);
  };
  SmallVector<StringRef> slotAxes = routingSide.getSplitAxes(slots);
  return leads(experts) && leads(slots) && routingSide.getSplitAxes(experts).empty() &&
         slotAxes.size() == 1 && slotAxes.front() == op.getOver();
}

struct FilledAllToAllPass
    : sharding::impl::MTPFilledAllToAllPassBase<FilledAllToAllPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func.getBody().hasOneBlock())
      return;
    Block &body = func.getBody().front();
    SmallVector<Routing> routings;
    for (Operation &op : body)
      if (std::optional<Routing> routing = routingOf(&op))
        routings.push_back(*routing);
    if (routings.empty())
      return;
    // One count per indices value, right after them.
    llvm::DenseMap<Value, Value> counts;
    for (auto op : llvm::to_vector(body.getOps<mtp::AllToAllOp>())) {
      if (op.getFilled())
        continue;
      const Routing *routing = droplessRouting(routings, op.getFrom(), op.getTo());
      if (!routing || !movesWholeExpertSlots(op, routing->expertDim))
        continue;
      StringRef experts = routing->expertDim;
      Value indices = routing->indices;
      Value &filled = counts[indices];
      if (!filled) {
        OpBuilder b(&getContext());
        if (Operation *def = indices.getDefiningOp())
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointToStart(&body);
        auto global = cast<mtp::ShardedTensorType>(op.getInput().getType()).getGlobal();
        auto type = NamedTensorType::get(&getContext(), {b.getStringAttr(experts)},
                                         {global.getDimSize(experts)}, b.getI64Type());
        filled = mt::ExpertLoadOp::create(b, op.getLoc(), type, indices,
                                          b.getStringAttr(routing->kDim),
                                          b.getStringAttr(experts));
      }
      op.getFilledMutable().assign(filled);
    }
  }
};

} // namespace
