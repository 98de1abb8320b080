//===- SavedActivations.cpp - what each layer keeps for its backward ------===//

#include "compiler/analysis/SavedActivations.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mtc;

namespace {

/// `file:line:col` of the innermost source position in `loc` (the file's name only), or "".
std::string sourcePosition(Location loc) {
  auto position = loc->findInstanceOf<FileLineColLoc>();
  if (!position)
    return "";
  return llvm::formatv("{0}:{1}:{2}", llvm::sys::path::filename(position.getFilename().getValue()),
                       position.getLine(), position.getColumn())
      .str();
}

SavedValue describe(Value value) {
  SavedValue saved;
  saved.type = cast<mt::NamedTensorType>(value.getType());
  saved.bytes = mt::getSizeInBytes(saved.type);
  if (Operation *op = value.getDefiningOp()) {
    saved.producer = op->getName().getStringRef().str();
    saved.location = sourcePosition(op->getLoc());
  } else {
    auto argument = cast<BlockArgument>(value);
    saved.producer = "argument " + std::to_string(argument.getArgNumber());
    saved.location = sourcePosition(argument.getLoc());
  }
  return saved;
}

} // namespace

int64_t LayerSavedActivations::bytes() const {
  int64_t total = 0;
  for (const SavedValue &value : values)
    total += value.bytes;
  return total;
}

FailureOr<std::vector<LayerSavedActivations>>
mtc::computeSavedActivations(ModuleOp partitioned) {
  auto step = partitioned.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return partitioned.emitError("no forward_backward function: the saved activations are "
                                 "read from the single-stage training step"),
           failure();
  std::vector<LayerSavedActivations> layers;
  WalkResult walked = step.walk([&](mt::RepeatOp repeat) {
    if (repeat.getReverse())
      return WalkResult::advance();
    auto forward = partitioned.lookupSymbol<func::FuncOp>(repeat.getCallee());
    if (!forward) {
      repeat.emitOpError("repeats '") << repeat.getCallee() << "', which is not a function";
      return WalkResult::interrupt();
    }
    // The results past the carried ones are stacked: what each instance keeps (the plan's
    // saved_activations, compiler/plan/PlanWriter.cpp, sums the same on global types).
    LayerSavedActivations layer;
    layer.function = forward.getSymName().str();
    layer.instances = repeat.getCount();
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    // mt-expert-load's routing counts are stacked too, but reported, not read backward.
    for (Value value : ret.getOperands().drop_front(repeat.getNumCarried()))
      if (!value.getDefiningOp<mt::ExpertLoadOp>())
        layer.values.push_back(describe(value));
    layers.push_back(std::move(layer));
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();
  return layers;
}

void mtc::printSavedActivations(const std::vector<LayerSavedActivations> &layers,
                                llvm::raw_ostream &os) {
  os << "saved activations per layer instance and rank (what its backward reads):\n";
  if (layers.empty())
    os << "  (no repeated layer)\n";
  for (const LayerSavedActivations &layer : layers) {
    os << llvm::formatv("  {0} ({1} instances): {2} bytes\n", layer.function, layer.instances,
                        layer.bytes());
    for (const SavedValue &value : layer.values) {
      std::string type;
      llvm::raw_string_ostream typeText(type);
      typeText << "[";
      llvm::interleaveComma(value.type.getDims(), typeText, [&](const mt::NamedDim &dim) {
        typeText << dim.name.getValue() << "=" << dim.size;
      });
      typeText << "] " << value.type.getElementType();
      os << llvm::formatv("    {0,12} bytes  {1,-16} {2,-22} {3}\n", value.bytes, value.producer,
                          value.location, type);
    }
  }
}
