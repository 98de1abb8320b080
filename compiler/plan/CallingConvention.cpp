//===- CallingConvention.cpp - how the runtime calls compiled steps -------===//

#include "compiler/plan/CallingConvention.h"

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/Common/UpdateInPlace.h"
#include "compiler/transforms/DataInputs.h"
#include "compiler/transforms/ResetDocuments.h"
#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mtc;
namespace json = llvm::json;

namespace {


json::Object buffer(StringRef kind, StringRef name, Type type) {
  auto tensor = cast<mt::NamedTensorType>(type);
  json::Array dims;
  for (const mt::NamedDim &dim : tensor.getDims())
    dims.push_back(json::Object{{"name", dim.name.getValue()}, {"size", dim.size}});
  return json::Object{{"kind", kind},
                      {"name", name.str()}, // copied: dataInputName's are temporaries
                      {"dtype", planDTypeName(tensor.getElementType())},
                      {"dims", std::move(dims)}};
}

/// The symbol an outlined argument or result carries (`mt.param = @x` / `mt.state = @x`).
std::optional<std::pair<StringRef, StringRef>> outlinedSymbol(DictionaryAttr attrs) {
  if (!attrs)
    return std::nullopt;
  for (StringRef kind : {"param", "state"})
    if (auto symbol = attrs.getAs<FlatSymbolRefAttr>(("mt." + kind).str()))
      return std::pair{kind, symbol.getValue()};
  return std::nullopt;
}

/// A buffer of a pipeline chunk or stage function, from the attributes mt-pipeline-chunks
/// and mt-pipeline-optimizer give its arguments and results: a parameter, a state, a
/// gradient, or a buffer of a kind (a chunk's data input is kind `input` named by its
/// `mt.input`; residuals and stash entries carry their index).
json::Object pipelineBuffer(DictionaryAttr attrs, Type type) {
  if (auto symbol = outlinedSymbol(attrs))
    return buffer(symbol->first, symbol->second, type);
  if (auto grad = attrs ? attrs.getAs<FlatSymbolRefAttr>(mt::MTDialect::kGradAttrName) : nullptr)
    return buffer("grad", grad.getValue(), type);
  auto kindAttr = attrs ? attrs.getAs<StringAttr>(mt::MTDialect::kBufferAttrName) : nullptr;
  StringRef kind = kindAttr ? kindAttr.getValue() : "";
  if (kind == "input")
    if (auto name = attrs.getAs<StringAttr>(transforms::kInputNameAttrName))
      return buffer("input", name.getValue(), type);
  // prefill's and decode_step's token ids and decode_step's `position` (mt-kv-cache).
  if (kind == "tokens" || kind == "position")
    return buffer("input", kind, type);
  json::Object object = buffer(kind, kind, type);
  if (auto index = attrs ? attrs.getAs<IntegerAttr>(mt::MTDialect::kIndexAttrName) : nullptr)
    object["index"] = index.getInt();
  return object;
}

/// The results of `func` that compiled code writes into their arguments
/// (mtc-update-in-place): no outputs of the compiled function.
llvm::SmallDenseSet<unsigned> updatedInPlace(func::FuncOp func) {
  llvm::SmallDenseSet<unsigned> results;
  for (auto [result, argument] : codegen::updatedArguments(func))
    results.insert(result);
  return results;
}

/// The symbol, inputs and outputs of a pipeline chunk or stage function.
json::Object describePipelineFunction(func::FuncOp func) {
  json::Array inputs, outputs;
  for (auto [index, type] : llvm::enumerate(func.getArgumentTypes()))
    inputs.push_back(pipelineBuffer(func.getArgAttrDict(index), type));
  llvm::SmallDenseSet<unsigned> inPlace = updatedInPlace(func);
  for (auto [index, type] : llvm::enumerate(func.getResultTypes()))
    if (!inPlace.contains(index))
      outputs.push_back(pipelineBuffer(func.getResultAttrDict(index), type));
  return json::Object{{"symbol", (codegen::kPackedEntryPrefix + func.getSymName()).str()},
                      {"inputs", std::move(inputs)},
                      {"outputs", std::move(outputs)}};
}

json::Object describeChunkFunction(func::FuncOp func, int64_t chunk) {
  json::Object object = describePipelineFunction(func);
  json::Array layers;
  if (auto range = func->getAttrOfType<DenseI64ArrayAttr>(mt::MTDialect::kChunkLayersAttrName))
    for (int64_t value : range.asArrayRef())
      layers.push_back(value);
  object["chunk"] = chunk;
  object["layers"] = std::move(layers);
  return object;
}

} // namespace

std::string mtc::planDTypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  if (type.isF64())
    return "f64";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  return "unknown";
}

json::Object mtc::describeCallingConvention(ModuleOp module) {
  json::Object functions;
  for (StringRef name : {"forward", "forward_backward", "optimizer_step", "logits"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    auto grads = func->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName);
    json::Array inputs, outputs;
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      if (auto symbol = outlinedSymbol(func.getArgAttrDict(index))) {
        inputs.push_back(buffer(symbol->first, symbol->second, type));
        continue;
      }
      // optimizer_step(step, grad_scale, grads...); the others take the token ids.
      if (name == "optimizer_step")
        inputs.push_back(index == 0   ? buffer("step", "step", type)
                         : index == 1 ? buffer("grad_scale", "grad_scale", type)
                                      : buffer("grad",
                                               cast<FlatSymbolRefAttr>(grads[index - 2]).getValue(),
                                               type));
      else
        inputs.push_back(buffer("input", transforms::dataInputName(func, index), type));
    }
    llvm::SmallDenseSet<unsigned> inPlace = updatedInPlace(func);
    for (auto [index, type] : llvm::enumerate(func.getResultTypes())) {
      if (inPlace.contains(index))
        continue;
      if (auto symbol = outlinedSymbol(func.getResultAttrDict(index))) {
        outputs.push_back(buffer(symbol->first, symbol->second, type));
        continue;
      }
      // optimizer_step's norm and learning rate, or a statistic the step returns after its
      // gradients (mt-expert-load's counts).
      if (auto kind = func.getResultAttrOfType<StringAttr>(index, mt::MTDialect::kBufferAttrName)) {
        outputs.push_back(buffer(kind.getValue(), kind.getValue(), type));
        continue;
      }
      if (index == 0)
        outputs.push_back(buffer("loss", "loss", type));
      else
        outputs.push_back(
            buffer("grad", cast<FlatSymbolRefAttr>(grads[index - 1]).getValue(), type));
    }
    functions[name] = json::Object{{"symbol", (codegen::kPackedEntryPrefix + name).str()},
                                   {"inputs", std::move(inputs)},
                                   {"outputs", std::move(outputs)}};
  }
  for (auto func : module.getOps<func::FuncOp>())
    if (auto chunk = func->getAttrOfType<IntegerAttr>(mt::MTDialect::kPipelineChunkAttrName))
      functions[func.getSymName()] = describeChunkFunction(func, chunk.getInt());
  // Cached generation (mt-kv-cache): every argument and result says what it holds.
  for (StringRef name : {"prefill", "decode_step"})
    if (auto func = module.lookupSymbol<func::FuncOp>(name))
      functions[name] = describePipelineFunction(func);
  // The pipeline stages' optimizer functions (mt-pipeline-optimizer).
  for (auto func : module.getOps<func::FuncOp>())
    if (auto stage = func->getAttrOfType<IntegerAttr>(mt::MTDialect::kPipelineStageAttrName)) {
      json::Object object = describePipelineFunction(func);
      object["stage"] = stage.getInt();
      functions[func.getSymName()] = std::move(object);
    }
  return functions;
}

void mtc::eraseSingleStageEntries(ModuleOp module) {
  if (!module->hasAttr(mt::MTDialect::kPipelineAttrName))
    return;
  for (StringRef name : {"forward", "forward_backward", "optimizer_step", "logits"})
    if (auto func = module.lookupSymbol<func::FuncOp>(name))
      func.erase();
}
