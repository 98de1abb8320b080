//===- FunctionCost.cpp - what one call of a step function computes -------===//

#include "compiler/analysis/FunctionCost.h"
#include "compiler/analysis/FusedKernels.h"

#include "compiler/fusion/FusionRule.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/FusedAttention.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <memory>

using namespace mlir;
using namespace mtc;

namespace {

/// The micro-batch dimension's name (frontend/MLIRGen.cpp binds it from train { micro_batch }).
constexpr StringLiteral kBatchDim = "batch";

bool hasBatch(Type type) {
  auto tensor = dyn_cast<mt::NamedTensorType>(type);
  return tensor && tensor.hasDim(kBatchDim);
}

/// 2 x the product of every distinct dimension of both operands.
int64_t contractFlops(mt::ContractOp op) {
  auto lhs = cast<mt::NamedTensorType>(op.getLhs().getType());
  auto rhs = cast<mt::NamedTensorType>(op.getRhs().getType());
  int64_t product = lhs.getNumElements();
  for (const mt::NamedDim &dim : rhs.getDims())
    if (!lhs.hasDim(dim.name))
      product *= dim.size;
  return 2 * product;
}

/// Ops that compute nothing: views, casts between the global and local types, constants
/// and the parameter and state references; and the casts to f32 and back of a low-precision
/// composite op's decomposition (mt::kStoredTypeAttrName), which its fused kernel does in
/// registers.
bool movesNothing(Operation *op) {
  return isa<mt::RenameOp, mt::ParamRefOp>(op) || op->hasTrait<mt::OpTrait::CallConstant>() ||
         op->getDialect()->getNamespace() == "mtp" || op->getNumResults() == 0 ||
         (isa<mt::CastOp>(op) && op->hasAttr(mt::kStoredTypeAttrName));
}

/// What the cost model looks through: the ops mt-to-linalg lowers to no code, and the
/// casts of a low-precision composite op's decomposition, done in registers.
bool passesThrough(Operation *op) {
  return fusion::isPassThrough(op) ||
         (isa<mt::CastOp>(op) && op->hasAttr(mt::kStoredTypeAttrName));
}

/// The ops priced by their traffic: every computing op but a matrix product and fused
/// attention (fusedAttentionCost).
bool isTrafficKernel(Operation *op) {
  return !isa<func::FuncOp, func::ReturnOp, func::CallOp, mt::RepeatOp, mt::ContractOp,
              mt::AttentionOp, mt::AttentionGradOp>(op) &&
         !movesNothing(op);
}

/// The bytes `op` reads or writes of a tensor of `type`. The f32 tensors of a low-precision
/// composite op's decomposition (mt::kStoredTypeAttrName: computed in f32, stored in bf16 or
/// f16 between kernels) count at the low type's size.
int64_t trafficBytes(Operation *op, Type type) {
  auto stored = op->getAttrOfType<TypeAttr>(mt::kStoredTypeAttrName);
  auto tensor = dyn_cast<mt::NamedTensorType>(type);
  if (stored && tensor && tensor.getElementType().isF32())
    return tensor.getNumElements() * mt::getElementSizeInBytes(stored.getValue());
  return mt::getSizeInBytes(type);
}

/// The traffic of the fused kernel rooted at `root`: each value its ops read that none of
/// them computes, once (the scalar constants folded into its body aside), and the root's
/// results; `reduce_mean` adds the kernel between its sum and its division, rope the kernel
/// of its cos and sin tables.
FunctionCost kernelCost(const FusedKernels &kernels, Operation *root) {
  FunctionCost cost;
  cost.ops = 1;
  auto count = [&](Operation *op, Type type) {
    int64_t bytes = trafficBytes(op, type);
    cost.trafficBytes += bytes;
    if (hasBatch(type))
      cost.batchTrafficBytes += bytes;
  };
  ArrayRef<Operation *> members = kernels.members(root);
  llvm::DenseSet<Value> read;
  for (Operation *op : members) {
    for (Value operand : op->getOperands()) {
      Value source = kernels.source(operand);
      Operation *def = source.getDefiningOp();
      if (isa_and_nonnull<mt::ConstantOp>(def) ||
          (def && kernels.rootOf(def) == root && def != root) || !read.insert(source).second)
        continue;
      count(op, operand.getType());
    }
    fusion::KernelShape shape = fusion::kernelShapeOf(op);
    if (shape.splitInTwo) {
      ++cost.ops;
      for (Type type : op->getResultTypes()) {
        count(op, type);
        count(op, type);
      }
    }
    // The tables' kernel writes them and the op's reads them; they have no batch dimension.
    if (shape.tableBytes) {
      ++cost.ops;
      cost.trafficBytes += 2 * shape.tableBytes;
    }
  }
  for (Type type : root->getResultTypes())
    count(root, type);
  return cost;
}

/// A fused attention op (`mt.attention` or `mt.attention_grad` left whole under
/// `mt.fused_attention`, lowered to FlashAttention-2's block loops): one kernel reading its
/// operands and writing its results once (the scores and probabilities stay in the blocks),
/// and its matrix products over the block pairs it computes (those above the diagonal
/// skipped when causal), 2 per pair forward (q k^T, p v), 5 backward (q k^T again, p^T do,
/// do v^T, ds k, ds^T q), each product priced at the size of all its pairs together.
template <typename AttentionLikeOp>
FunctionCost fusedAttentionCost(AttentionLikeOp op, int products) {
  auto query = cast<mt::NamedTensorType>(op.getQuery().getType());
  int64_t seq = query.getDimSizes()[*query.getDimIndex(op.getSeqDim())];
  int64_t headDim = query.getDimSizes()[*query.getDimIndex(op.getHeadDim())];
  int64_t block = mt::fusedAttentionBlockFor(
      seq, mt::getFusedAttentionBlock(op).value_or(mt::kDefaultFusedAttentionBlock));
  int64_t blocks = seq / block;
  int64_t pairs = op.getCausal() ? blocks * (blocks + 1) / 2 : blocks * blocks;
  // Every query row (batch, heads, position) meets `block` keys per pair of its block.
  int64_t queryRows = query.getNumElements() / headDim;
  int64_t flops = 2 * (queryRows / blocks) * pairs * block * headDim;
  FunctionCost cost;
  cost.ops = 1;
  cost.gemms.push_back({flops, products});
  if (!hasBatch(query))
    cost.unbatchedGemmFlops = products * flops;
  auto count = [&](Type type) {
    int64_t bytes = trafficBytes(op, type);
    cost.trafficBytes += bytes;
    if (hasBatch(type))
      cost.batchTrafficBytes += bytes;
  };
  for (Type type : op->getOperandTypes())
    count(type);
  for (Type type : op->getResultTypes())
    count(type);
  return cost;
}

void add(FunctionCost &into, const FunctionCost &callee, int64_t times) {
  into.trafficBytes += times * callee.trafficBytes;
  into.batchTrafficBytes += times * callee.batchTrafficBytes;
  into.unbatchedGemmFlops += times * callee.unbatchedGemmFlops;
  into.ops += times * callee.ops;
  for (const GemmCount &gemm : callee.gemms) {
    auto it = llvm::find_if(into.gemms, [&](const GemmCount &g) { return g.flops == gemm.flops; });
    if (it == into.gemms.end())
      into.gemms.push_back({gemm.flops, times * gemm.count});
    else
      it->count += times * gemm.count;
  }
}

class Coster {
public:
  explicit Coster(ModuleOp module) : module(module) {}

  const FunctionCost &of(StringRef name) {
    if (auto it = memo.find(name); it != memo.end())
      return it->second;
    FunctionCost cost;
    if (auto func = module.lookupSymbol<func::FuncOp>(name))
      addWalk(cost, func);
    return memo[name] = std::move(cost);
  }

  /// Adds what `root` and the ops nested in it compute (a function's body, one op): its
  /// matrix products, and the kernels fused as mtc fuses them, each counted at its root.
  void addWalk(FunctionCost &cost, Operation *root) {
    root->walk([&](Operation *op) {
      if (isa<func::FuncOp, func::ReturnOp>(op))
        return;
      if (auto repeat = dyn_cast<mt::RepeatOp>(op))
        return add(cost, of(repeat.getCallee()), repeat.getCount());
      if (auto call = dyn_cast<func::CallOp>(op))
        return add(cost, of(call.getCallee()), 1);
      if (auto contract = dyn_cast<mt::ContractOp>(op)) {
        FunctionCost gemm;
        gemm.gemms.push_back({contractFlops(contract), 1});
        gemm.ops = 1;
        if (!hasBatch(contract.getLhs().getType()) && !hasBatch(contract.getRhs().getType()))
          gemm.unbatchedGemmFlops = contractFlops(contract);
        add(cost, gemm, 1);
        return;
      }
      if (auto attention = dyn_cast<mt::AttentionOp>(op))
        return add(cost, fusedAttentionCost(attention, 2), 1);
      if (auto attentionGrad = dyn_cast<mt::AttentionGradOp>(op))
        return add(cost, fusedAttentionCost(attentionGrad, 5), 1);
      if (!isTrafficKernel(op))
        return;
      const FusedKernels &kernels = kernelsOf(*op->getBlock());
      if (kernels.rootOf(op) == op)
        add(cost, kernelCost(kernels, op), 1);
    });
    llvm::sort(cost.gemms,
               [](const GemmCount &a, const GemmCount &b) { return a.flops < b.flops; });
  }

private:
  const FusedKernels &kernelsOf(Block &block) {
    std::unique_ptr<FusedKernels> &kernels = blocks[&block];
    if (!kernels)
      kernels = std::make_unique<FusedKernels>(block, isTrafficKernel, passesThrough);
    return *kernels;
  }

  ModuleOp module;
  llvm::StringMap<FunctionCost> memo;
  llvm::DenseMap<Block *, std::unique_ptr<FusedKernels>> blocks;
};

} // namespace

std::map<std::string, FunctionCost> mtc::computeFunctionCosts(ModuleOp partitioned) {
  Coster coster(partitioned);
  std::map<std::string, FunctionCost> costs;
  for (auto func : partitioned.getOps<func::FuncOp>()) {
    StringRef name = func.getSymName();
    if (name == "forward_backward" || name == "optimizer_step" ||
        func->hasAttr(mt::MTDialect::kPipelineChunkAttrName) ||
        func->hasAttr(mt::MTDialect::kPipelineStageAttrName))
      costs[name.str()] = coster.of(name);
  }
  return costs;
}

FunctionCost mtc::computeFunctionCost(ModuleOp partitioned, StringRef name) {
  Coster coster(partitioned);
  return coster.of(name);
}

FunctionCost mtc::computeOpCost(ModuleOp partitioned, Operation *op) {
  Coster coster(partitioned);
  FunctionCost cost;
  coster.addWalk(cost, op);
  return cost;
}
