//===- FusionRule.cpp - which kernels mtc's fusion merges -----------------===//

#include "compiler/fusion/FusionRule.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/CallInterfaces.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::fusion;

bool fusion::fusesInto(LoopNest producer, LoopNest consumer, bool producerHasOneUse,
                       bool consumerLoopsStayDefined, bool recomputesCostly) {
  return producer == LoopNest::Parallel && consumer != LoopNest::Opaque &&
         producerHasOneUse && consumerLoopsStayDefined && !recomputesCostly;
}

// On mt ops, the ops whose scalar lowering (compiler/codegen/ToLinalg/MTToLinalg.cpp's
// computeScalar, RopeDropoutToLinalg.cpp) holds such an op: exp, log, tanh, sigmoid and
// silu (exp), gelu and its gradient (erf or tanh), cos, pow, and dropout (its Philox
// decision).
bool fusion::isCostlyPerElement(Operation *op) {
  if (isa<CallOpInterface>(op))
    return true;
  if (isa<mt::ExpOp, mt::LogOp, mt::TanhOp, mt::SigmoidOp, mt::SiluOp, mt::GeluOp,
          mt::GeluGradOp, mt::CosOp, mt::PowOp>(op))
    return true;
  if (auto dropout = dyn_cast<mt::DropoutOp>(op))
    return dropout.getRate().convertToDouble() != 0;
  return isa<math::MathDialect>(op->getDialect()) &&
         !isa<math::SqrtOp, math::RsqrtOp, math::AbsFOp, math::AbsIOp, math::FmaOp,
              math::FloorOp, math::CeilOp, math::RoundOp, math::RoundEvenOp, math::TruncOp,
              math::CopySignOp>(op);
}

// Mirrors the patterns of compiler/codegen/ToLinalg: MTToLinalg.cpp's ElementwiseLowering
// and MapLowering (one all-parallel generic), ReduceLowering (a reduction generic; mean
// then an all-parallel division), RopeDropoutToLinalg.cpp (dropout: an all-parallel
// generic; rope: one whose body also reads its input at the partner's position, a second
// use of the input, so it fuses as a producer only; before it, its cos and sin tables),
// ShapeOpsToLinalg.cpp (iota: an all-parallel generic without inputs). FunctionCostTest
// checks the kernel counts against mt-to-linalg and mtc-fuse-elementwise.
KernelShape fusion::kernelShapeOf(Operation *op) {
  constexpr LoopNest parallel = LoopNest::Parallel, reduction = LoopNest::Reduction,
                     opaque = LoopNest::Opaque;
  if (isa<mt::AddOp, mt::SubOp, mt::MulOp, mt::DivOp, mt::MaxOp, mt::PowOp, mt::GreaterOp,
          mt::NegOp, mt::ExpOp, mt::LogOp, mt::SqrtOp, mt::RsqrtOp, mt::TanhOp, mt::SigmoidOp,
          mt::ReluOp, mt::SiluOp, mt::GeluOp, mt::GeluGradOp, mt::CosOp, mt::CastOp,
          mt::TransposeOp, mt::BroadcastOp, mt::DropoutOp, mt::IotaOp>(op))
    return {parallel, parallel, false};
  if (isa<mt::ReduceSumOp, mt::ReduceMaxOp>(op))
    return {reduction, reduction, false};
  if (isa<mt::ReduceMeanOp>(op))
    return {reduction, parallel, true};
  if (auto rope = dyn_cast<mt::RopeOp>(op)) {
    auto type = cast<mt::NamedTensorType>(rope.getInput().getType());
    int64_t tableElements = type.getDimSizes()[*type.getDimIndex(rope.getDim())] / 2 *
                            type.getDimSizes()[*type.getDimIndex(rope.getPosition())];
    return {opaque, parallel, false, 2 * tableElements * int64_t(sizeof(double))};
  }
  return {opaque, opaque, false};
}

bool fusion::isPassThrough(Operation *op) {
  if (isa<mt::RenameOp, mtp::ToLocalOp, mtp::FromLocalOp>(op))
    return true;
  auto dropout = dyn_cast<mt::DropoutOp>(op);
  return dropout && dropout.getRate().convertToDouble() == 0;
}
