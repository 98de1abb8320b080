//===- DataInputs.cpp - the names of a step's data inputs -----------------===//

#include "compiler/transforms/DataInputs.h"

#include "compiler/transforms/ResetDocuments.h"
#include "dialects/mt/IR/MTDialect.h"

std::string mtc::transforms::dataInputName(mlir::func::FuncOp func, unsigned index) {
  if (auto name = func.getArgAttrOfType<mlir::StringAttr>(index, kInputNameAttrName))
    return name.str();
  if (index < std::size(mt::MTDialect::kEntryInputNames))
    return mt::MTDialect::kEntryInputNames[index].str();
  return ("input" + llvm::Twine(index)).str();
}
