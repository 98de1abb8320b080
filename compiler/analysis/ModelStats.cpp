//===- ModelStats.cpp - parameter counts and FLOPs of an mt model ---------===//

#include "compiler/analysis/ModelStats.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mtc;

namespace {

std::string withThousands(int64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string humanCount(double value) {
  const char *units[] = {"", "K", "M", "G", "T", "P"};
  unsigned unit = 0;
  while (value >= 1000 && unit + 1 < std::size(units)) {
    value /= 1000;
    ++unit;
  }
  return llvm::formatv("{0:F2}{1}", value, units[unit]).str();
}

} // namespace

/// 2 x the product of every distinct dimension of both operands: one multiply and one add
/// per (output element, contracted index) pair.
static double contractFlops(mt::ContractOp op) {
  auto lhs = cast<mt::NamedTensorType>(op.getLhs().getType());
  auto rhs = cast<mt::NamedTensorType>(op.getRhs().getType());
  double product = static_cast<double>(lhs.getNumElements());
  for (const mt::NamedDim &dim : rhs.getDims())
    if (!lhs.hasDim(dim.name))
      product *= static_cast<double>(dim.size);
  return 2 * product;
}

/// q k^T and p v: 2 x 2 x (query elements) x (key length).
static double attentionFlops(mt::AttentionOp op) {
  auto query = cast<mt::NamedTensorType>(op.getQuery().getType());
  auto key = cast<mt::NamedTensorType>(op.getKey().getType());
  return 4.0 * static_cast<double>(query.getNumElements()) *
         static_cast<double>(key.getDimSize(op.getSeqDim()));
}

double FlopCounter::count(Operation *op) {
  if (auto contract = dyn_cast<mt::ContractOp>(op))
    return contractFlops(contract);
  if (auto attention = dyn_cast<mt::AttentionOp>(op))
    return attentionFlops(attention);
  if (auto repeat = dyn_cast<mt::RepeatOp>(op))
    if (auto callee = symbols.lookup<func::FuncOp>(repeat.getCallee()))
      return static_cast<double>(repeat.getCount()) * count(callee);
  return 0;
}

double FlopCounter::count(func::FuncOp func) {
  if (auto it = memo.find(func); it != memo.end())
    return it->second;
  double flops = 0;
  func.walk([&](Operation *op) {
    if (!isa<func::FuncOp>(op))
      flops += count(op);
  });
  memo[func] = flops;
  return flops;
}

FailureOr<ModelStats> mtc::computeModelStats(ModuleOp module) {
  auto entry = module.lookupSymbol<func::FuncOp>("forward");
  if (!entry || entry.getNumArguments() == 0)
    return module.emitError("model has no 'forward' function taking the token ids");

  // Each layer is applied by mt.repeat; its parameters exist once per repeat.
  llvm::StringMap<int64_t> repeatsOfLayer;
  module.walk([&](mt::RepeatOp repeat) { repeatsOfLayer[repeat.getCallee()] += repeat.getCount(); });

  ModelStats stats;
  stats.modelName = module.getSymName().value_or("model").str();
  for (auto param : module.getOps<mt::ParamOp>()) {
    ParamStat stat{param.getSymName().str(), param.getTensorType(), 1};
    if (std::optional<StringRef> layer = param.getLayer())
      stat.instances = repeatsOfLayer.lookup(*layer);
    stats.totalParams += stat.total();
    stats.params.push_back(std::move(stat));
  }

  auto tokens = cast<mt::NamedTensorType>(entry.getArgumentTypes().front());
  stats.tokensPerMicroBatch = tokens.getNumElements();
  FlopCounter counter(module);
  stats.forwardFlopsPerToken =
      counter.count(entry) / static_cast<double>(stats.tokensPerMicroBatch);
  stats.backwardFlopsPerToken = 2 * stats.forwardFlopsPerToken;
  return stats;
}

void mtc::printModelStats(const ModelStats &stats, llvm::raw_ostream &os) {
  size_t nameWidth = 9, shapeWidth = 5;
  std::vector<std::string> shapes;
  for (const ParamStat &param : stats.params) {
    shapes.push_back(param.type.dimsToString());
    nameWidth = std::max(nameWidth, param.name.size());
    shapeWidth = std::max(shapeWidth, shapes.back().size());
  }
  os << "model '" << stats.modelName << "'\n\n";
  os << llvm::formatv("{0} {1} {2,12} {3,7} {4,15}\n", llvm::left_justify("parameter", nameWidth),
                      llvm::left_justify("shape", shapeWidth), "elements",
                      "x", "total");
  for (auto [param, shape] : llvm::zip(stats.params, shapes))
    os << llvm::formatv("{0} {1} {2,12} {3,7} {4,15}\n",
                        llvm::left_justify(param.name, nameWidth),
                        llvm::left_justify(shape, shapeWidth),
                        withThousands(param.type.getNumElements()), param.instances,
                        withThousands(param.total()));
  os << llvm::formatv("{0} {1,15}\n\n",
                      llvm::left_justify("total parameters", 
                                      nameWidth + shapeWidth + 22),
                      withThousands(stats.totalParams));
  os << llvm::formatv("parameters: {0} ({1})\n", withThousands(stats.totalParams),
                      humanCount(static_cast<double>(stats.totalParams)));
  os << llvm::formatv("tokens per micro-batch: {0}\n", stats.tokensPerMicroBatch);
  os << llvm::formatv("FLOPs per token: forward {0} ({1}), backward {2} ({3}), total {4} "
                      "({5})\n",
                      static_cast<int64_t>(stats.forwardFlopsPerToken),
                      humanCount(stats.forwardFlopsPerToken),
                      static_cast<int64_t>(stats.backwardFlopsPerToken),
                      humanCount(stats.backwardFlopsPerToken),
                      static_cast<int64_t>(stats.forwardFlopsPerToken +
                                           stats.backwardFlopsPerToken),
                      humanCount(stats.forwardFlopsPerToken + stats.backwardFlopsPerToken));
  os << "  (matrix products only, attention counted in full; backward = 2 x forward)\n";
}
