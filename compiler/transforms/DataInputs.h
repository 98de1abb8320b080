//===- DataInputs.h - the names of a step's data inputs ----------*- C++ -*-===//
//
// An entry function's data arguments (the token ids, the labels, mt-loss-mask's loss mask,
// mt-reset-documents' position ids) are the plan's inputs, each by name: the calling
// convention names the entry functions' buffers with it, and mt-pipeline-chunks gives each
// chunk function the data arguments it reads under the same names, so that the runtime
// feeds every function the same way (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_TRANSFORMS_DATAINPUTS_H
#define MTC_COMPILER_TRANSFORMS_DATAINPUTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mtc::transforms {

/// The plan's name of `func`'s data argument `index`: its `mt.input` attribute
/// (kInputNameAttrName: position_ids) if any, else mt::MTDialect's kEntryInputNames by place
/// (tokens, labels, loss_mask; `input<index>` past them).
std::string dataInputName(mlir::func::FuncOp func, unsigned index);

} // namespace mtc::transforms

#endif // MTC_COMPILER_TRANSFORMS_DATAINPUTS_H
