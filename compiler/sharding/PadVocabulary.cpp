//===- PadVocabulary.cpp - pad a vocabulary tp does not divide, masked ----===//
//
// Megatron pads the vocabulary to a multiple of tp and lets the padded classes into the
// softmax, so its loss changes with tp (Megatron-LM issue #1754). Here the padded classes
// are masked out of the loss, which keeps the model the same under every tp.
//
//===----------------------------------------------------------------------===//

#include "compiler/sharding/Layout.h"
#include "compiler/sharding/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "dialects/mt/Utils/Vocabulary.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MathExtras.h"

namespace mtc::sharding {
#define GEN_PASS_DEF_MTPADVOCABULARYPASS
#include "compiler/sharding/Passes.h.inc"
} // namespace mtc::sharding

using namespace mlir;
using namespace mtc;

namespace {

/// The tp degree `parallel` asks for, if it maps `dim` to tp (its `layout`, else
/// Megatron's default layout); 1 otherwise.
int64_t tensorParallelDegreeOf(mt::ParallelAttr parallel, StringRef dim) {
  if (!parallel || parallel.getTensorParallel() <= 1)
    return 1;
  bool split = parallel.getLayout()
                   ? parallel.getLayoutAxis(dim) == StringRef("tp")
                   : llvm::is_contained(sharding::kMegatronTensorParallelDims, dim);
  return split ? parallel.getTensorParallel() : 1;
}

/// `logits` with a large negative value added at the vocabulary positions >= `size` along
/// `dim` and exactly 0 elsewhere: the padded classes get probability 0 in the softmax (and
/// so gradient 0) while the real logits keep their bits. The positions are f32 (exact up to
/// 2^24, where bf16 is exact up to 256 only); the penalty is half the largest finite value
/// of the logits' type, far below any logit yet no overflow to -inf when a logit is added.
Value maskPaddedClasses(OpBuilder &b, Location loc, Value logits, StringRef dim, int64_t size) {
  mt::TensorBuilder t(b, loc);
  auto type = cast<mt::NamedTensorType>(logits.getType());
  Type f32 = b.getF32Type();
  auto positionsType = mt::NamedTensorType::get({mt::NamedDim{b.getStringAttr(dim),
                                                               type.getDimSize(dim)}},
                                                f32);
  Value positions = mt::IotaOp::create(b, loc, positionsType, dim);
  Value padded = t.greater(positions, t.scalar(static_cast<double>(size) - 0.5, positions));
  Type elementType = type.getElementType();
  if (elementType != f32)
    padded = mt::CastOp::create(b, loc, cast<mt::NamedTensorType>(padded.getType())
                                            .withElementType(elementType),
                                padded);
  const llvm::fltSemantics &semantics = cast<FloatType>(elementType).getFloatSemantics();
  double penalty = -0.5 * llvm::APFloat::getLargest(semantics).convertToDouble();
  return t.add(logits, t.mul(padded, t.scalar(penalty, logits)));
}

struct MTPadVocabularyPass
    : public sharding::impl::MTPadVocabularyPassBase<MTPadVocabularyPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The vocabulary: what the loss classifies over (the plan writer's `vocabulary`).
    mt::CrossEntropyOp loss;
    StringRef dim = mt::lossClassDim(module, &loss);
    if (!loss)
      return;
    int64_t size = cast<mt::NamedTensorType>(loss.getLogits().getType()).getDimSize(dim);
    int64_t tp = tensorParallelDegreeOf(mt::ParallelAttr::lookup(module), dim);
    if (size % tp == 0)
      return;
    int64_t padded = llvm::alignTo(size, tp);
    if (!mt::IotaOp::holdsPositions(Float32Type::get(&getContext()), padded)) {
      loss.emitError() << "cannot mask a vocabulary of " << padded
                       << " classes: its positions are not exact in f32 (at most 2^24)";
      return signalPassFailure();
    }
    MLIRContext *context = &getContext();
    Builder b(context);
    StringAttr name = b.getStringAttr(dim);

    // Every type, everywhere (function signatures, parameters, every op's results).
    AttrTypeReplacer replacer;
    replacer.addReplacement([&](mt::NamedTensorType type) -> std::optional<Type> {
      if (!type.hasDim(dim))
        return std::nullopt;
      SmallVector<mt::NamedDim> dims = type.getDims();
      for (mt::NamedDim &d : dims)
        if (d.name == name)
          d.size = padded;
      return type.withDims(dims);
    });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true, /*replaceLocs=*/false,
                                          /*replaceTypes=*/true);

    // Every loss over the vocabulary sees the padded classes masked.
    module.walk([&](mt::CrossEntropyOp op) {
      if (op.getDim() != dim)
        return;
      OpBuilder builder(op);
      op.getLogitsMutable().assign(
          maskPaddedClasses(builder, op.getLoc(), op.getLogits(), dim, size));
    });

    if (auto dimsAttr = module->getAttrOfType<DictionaryAttr>(mt::MTDialect::kDimsAttrName)) {
      NamedAttrList dims(dimsAttr);
      dims.set(name, b.getI64IntegerAttr(padded));
      module->setAttr(mt::MTDialect::kDimsAttrName, dims.getDictionary(context));
    }
    module->setAttr(sharding::kVocabularyAttrName,
                    b.getDictionaryAttr({b.getNamedAttr("dim", name),
                                         b.getNamedAttr("size", b.getI64IntegerAttr(size))}));
  }
};

} // namespace
