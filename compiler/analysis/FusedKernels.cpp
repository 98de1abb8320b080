//===- FusedKernels.cpp - the kernels mtc's fusion forms from mt ops ------===//

#include "compiler/analysis/FusedKernels.h"

#include "compiler/fusion/FusionRule.h"
#include "dialects/mt/IR/MTOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mtc;
using fusion::LoopNest;

namespace {

/// The uses of `value` once the pass-through ops are gone: their users' uses, transitively.
void collectUses(Value value, function_ref<bool(Operation *)> isPassThrough,
                 SmallVectorImpl<OpOperand *> &uses) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isPassThrough(user) && use.getOperandNumber() == 0 && user->getNumResults() == 1)
      collectUses(user->getResult(0), isPassThrough, uses);
    else
      uses.push_back(&use);
  }
}

/// Upstream's condition for fusing into a reduction: the fused kernel's inputs (the
/// producer's, but the scalar constants folded into its body) still name every dimension
/// of the producer's iteration space, its result's.
bool inputsDefineLoops(Operation *producer) {
  auto result = dyn_cast<mt::NamedTensorType>(producer->getResult(0).getType());
  if (!result)
    return false;
  llvm::StringSet<> named;
  for (Value operand : producer->getOperands()) {
    if (isa_and_nonnull<mt::ConstantOp>(operand.getDefiningOp()))
      continue;
    if (auto type = dyn_cast<mt::NamedTensorType>(operand.getType()))
      for (const mt::NamedDim &dim : type.getDims())
        named.insert(dim.name);
  }
  return llvm::all_of(result.getDims(),
                      [&](const mt::NamedDim &dim) { return named.contains(dim.name); });
}

/// The elements of `op`'s loop nest: of its largest operand or result (an elementwise op's
/// result names every dimension, a reduction's operand).
int64_t iterationElements(Operation *op) {
  int64_t elements = 0;
  for (Type type : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto tensor = dyn_cast<mt::NamedTensorType>(type))
      elements = std::max(elements, tensor.getNumElements());
  return elements;
}

} // namespace

FusedKernels::FusedKernels(Block &block, function_ref<bool(Operation *)> isKernel,
                           function_ref<bool(Operation *)> isPassThrough)
    : isPassThrough(isPassThrough) {
  // The ops whose kernel, with what is fused into it, is costly per element; producers come
  // first in the block, so an op's are known when it is reached.
  llvm::DenseSet<Operation *> costly;
  for (Operation &op : block) {
    if (fusion::isCostlyPerElement(&op))
      costly.insert(&op);
    if (!isKernel(&op) || op.getNumResults() != 1)
      continue;
    if (fusion::kernelShapeOf(&op).writes != LoopNest::Parallel)
      continue;
    SmallVector<OpOperand *> uses;
    collectUses(op.getResult(0), isPassThrough, uses);
    if (uses.size() != 1)
      continue;
    Operation *consumer = uses.front()->getOwner();
    if (consumer->getBlock() != &block || !isKernel(consumer))
      continue;
    LoopNest reads = fusion::kernelShapeOf(consumer).reads;
    bool recomputesCostly =
        costly.contains(&op) && iterationElements(consumer) > iterationElements(&op);
    if (fusion::fusesInto(LoopNest::Parallel, reads, /*producerHasOneUse=*/true,
                          reads != LoopNest::Reduction || inputsDefineLoops(&op),
                          recomputesCostly)) {
      fusedInto[&op] = consumer;
      if (costly.contains(&op))
        costly.insert(consumer);
    }
  }
  for (Operation &op : block) {
    if (!isKernel(&op))
      continue;
    Operation *root = &op;
    while (Operation *next = fusedInto.lookup(root))
      root = next;
    roots[&op] = root;
    kernels[root].push_back(&op);
  }
}

Operation *FusedKernels::rootOf(Operation *op) const { return roots.lookup(op); }

ArrayRef<Operation *> FusedKernels::members(Operation *root) const {
  auto it = kernels.find(root);
  if (it == kernels.end())
    return {};
  return it->second;
}

Value FusedKernels::source(Value value) const {
  while (Operation *def = value.getDefiningOp()) {
    if (!isPassThrough(def) || def->getNumOperands() == 0)
      break;
    value = def->getOperand(0);
  }
  return value;
}
