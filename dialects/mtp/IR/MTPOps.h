//===- MTPOps.h - mtp dialect operations -------------------------*- C++ -*-===//

#ifndef MTC_DIALECTS_MTP_IR_MTPOPS_H
#define MTC_DIALECTS_MTP_IR_MTPOPS_H

#include "dialects/mtp/IR/MTPDialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mtc::mtp {

/// The mesh axes `over` names: one axis, or a list of them.
llvm::SmallVector<llvm::StringRef> axisNames(mlir::StringAttr over);
llvm::SmallVector<llvm::StringRef> axisNames(mlir::ArrayAttr over);

namespace detail {
/// CollectiveOpInterface's verifier: the mesh has every axis the op works along.
mlir::LogicalResult verifyCollective(mlir::Operation *op);
} // namespace detail

} // namespace mtc::mtp

#include "dialects/mtp/IR/MTPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/mtp/IR/MTPOps.h.inc"

#endif // MTC_DIALECTS_MTP_IR_MTPOPS_H
