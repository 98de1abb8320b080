//===- MTDialect.h - mt dialect ---------------------------------*- C++ -*-===//
//
// The `mt` dialect, its named-dimension tensor type and its attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_IR_MTDIALECT_H
#define MTC_DIALECTS_MT_IR_MTDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Error.h"

namespace mtc::mt {

/// The memory-effect resource of parameters and optimizer state (`mt.param_ref` reads it,
/// `mt.assign` writes it).
struct ParameterResource : mlir::SideEffects::Resource::Base<ParameterResource> {
  llvm::StringRef getName() final { return "mt.parameter"; }
};

/// One dimension of a named-dimension tensor.
struct NamedDim {
  mlir::StringAttr name;
  int64_t size;
  bool operator==(const NamedDim &other) const {
    return name == other.name && size == other.size;
  }
};

} // namespace mtc::mt

#include "dialects/mt/IR/MTDialect.h.inc"
#include "dialects/mt/IR/MTEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/mt/IR/MTTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/mt/IR/MTAttrs.h.inc"

namespace mtc::mt {

/// Element types a tensor may hold: floats for values, integers for ids and labels.
bool isValidElementType(mlir::Type type);

/// The result type of a named-broadcasting elementwise op, or failure (with a diagnostic
/// through `emitError`) when a shared dimension disagrees in size.
mlir::FailureOr<NamedTensorType>
inferBroadcastType(NamedTensorType lhs, NamedTensorType rhs,
                   llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The result type of contracting `lhs` with `rhs` over `over`, or failure with a
/// diagnostic.
mlir::FailureOr<NamedTensorType>
inferContractType(NamedTensorType lhs, NamedTensorType rhs, llvm::ArrayRef<llvm::StringRef> over,
                  llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The type left after removing the dimensions `over` from `input`, or failure with a
/// diagnostic naming a missing dimension.
mlir::FailureOr<NamedTensorType>
inferReduceType(NamedTensorType input, llvm::ArrayRef<llvm::StringRef> over,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// `normal(0.02)`: an initialiser without the `#mt.init<...>` wrapper, as `mt.param`
/// prints it.
InitAttr parseInitSpec(mlir::AsmParser &parser);
void printInitSpec(mlir::AsmPrinter &printer, InitAttr init);

/// The layers of the model's stack: the counts of the forward `mt.repeat`s in `@forward`
/// (0 without).
int64_t countLayers(mlir::ModuleOp module);

/// The layers of each pipeline model chunk of `module` (ParallelAttr::getPipelineLayers
/// over countLayers): one chunk without `mt.parallel`. Fails, with a diagnostic on the
/// module, when the layers do not split evenly and no split is given.
mlir::FailureOr<llvm::SmallVector<int64_t>> getPipelineLayers(mlir::ModuleOp module);

/// How the pipeline settings are spelled where they were given (the .mtl's keys, mtc's
/// flags, #mt.parallel's fields), for the messages of checkPipelineSchedule.
struct PipelineSettingNames {
  llvm::StringRef pp;            // "pp", "--pp"
  llvm::StringRef virtualStages; // "vpp (virtual_stages)", "--virtual-stages"
  /// The virtual stages as given: "'vpp 2'", "--virtual-stages 2", "virtual_stages 2".
  llvm::function_ref<std::string(int64_t)> describeVirtualStages;
};

/// A rule of the pipeline settings that does not hold: the setting to blame and the message.
struct PipelineSettingProblem {
  enum class Setting { VirtualStages, Schedule } at;
  std::string message;
};

/// The rules of pp, the schedule and the virtual stages, wherever they are given: virtual
/// stages need pp above 1 and the interleaved (or zb-v) schedule, interleaved needs
/// virtual stages, zb-v runs exactly 2 chunks per stage (its default). The chunks per stage
/// the settings give are virtualStages, else 2 for zb-v, else 1.
std::optional<PipelineSettingProblem>
checkPipelineSchedule(int64_t stages, std::optional<PipelineSchedule> schedule,
                      std::optional<int64_t> virtualStages, const PipelineSettingNames &names);

/// Checks that an explicit split `layers` covers the `numLayers` layers of the model.
llvm::Error checkPipelineLayers(llvm::ArrayRef<int64_t> layers, int64_t numLayers);

/// The per-chunk split of `numLayers` layers over `stages` pipeline stages of `chunks`
/// virtual stages each, in model order (chunk c on stage c mod stages), with Megatron's
/// meaning of `first` / `last` (--decoder-first/last-pipeline-num-layers): those stages
/// hold that many layers, the others share the rest evenly. Each stage's layers split
/// evenly into its chunks. An error says what does not divide.
llvm::Expected<llvm::SmallVector<int64_t>>
splitPipelineLayers(int64_t numLayers, int64_t stages, int64_t chunks,
                    std::optional<int64_t> first = std::nullopt,
                    std::optional<int64_t> last = std::nullopt);

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_IR_MTDIALECT_H
